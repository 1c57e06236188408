/* Money as the interface writes it: the twin of accounts/money.py ``usd`` (same rule, same
 * table in tests/accounts/test_money.py): at least two decimals and at most four, trailing
 * zeros past the cents dropped; truncated toward zero, never rounded up (a spend below its
 * cap never reads as the cap); under $0.0001 two significant digits. It works on the decimal
 * STRING the server sends ("0.012500000"), never on a float, so no binary rounding creeps in.
 *
 * window.hermesMoney.usd(text) -> "$0.0125"; null, undefined or "" -> "—".
 * window.hermesMoney.nanos(text) -> the amount in billionths of a dollar (an integer Number,
 *   exact below $9,000,000), for sums; hermesMoney.fromNanos(n) -> its decimal string.
 */
(function () {
  "use strict";
  var NANO_DIGITS = 9;  /* UsageRecord.cost_usd has nine decimal places */

  function parts(text) {
    var m = /^\s*(-?)(\d*)(?:\.(\d*))?\s*$/.exec(String(text));
    if (!m || (m[2] === "" && !m[3])) {
      var n = Number(text);
      if (!isFinite(n)) return null;
      return parts(n.toFixed(NANO_DIGITS));
    }
    return { sign: m[1], whole: m[2].replace(/^0+(?=\d)/, "") || "0", frac: m[3] || "" };
  }

  function grouped(whole) { return whole.replace(/\B(?=(\d{3})+(?!\d))/g, ","); }

  function usd(text) {
    if (text === null || text === undefined || text === "") return "—";
    var p = parts(text);
    if (!p) return "—";
    var sign = p.sign, frac = p.frac;
    if (p.whole === "0" && !/[1-9]/.test(frac)) return "$0.00";
    if (p.whole === "0" && !/[1-9]/.test(frac.slice(0, 4))) {
      var first = frac.search(/[1-9]/);  /* two significant digits, toward zero */
      return sign + "$0." + (frac + "0").slice(0, first + 2);
    }
    var four = (frac + "0000").slice(0, 4);
    if (four.charAt(3) === "0") four = four.slice(0, 3);
    if (four.length === 3 && four.charAt(2) === "0") four = four.slice(0, 2);
    return sign + "$" + grouped(p.whole) + "." + four;
  }

  function nanos(text) {
    var p = parts(text);
    if (!p) return 0;
    var n = Number(p.whole) * 1e9 + Number((p.frac + "000000000").slice(0, NANO_DIGITS));
    return p.sign ? -n : n;
  }

  function fromNanos(n) {
    var sign = n < 0 ? "-" : "", abs = Math.abs(Math.round(n));
    var whole = Math.floor(abs / 1e9), frac = String(abs - whole * 1e9);
    return sign + whole + "." + ("000000000" + frac).slice(-NANO_DIGITS);
  }

  window.hermesMoney = { usd: usd, nanos: nanos, fromNanos: fromNanos };
})();
