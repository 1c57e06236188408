"""A reply, a tool call's arguments and a tool's output that hold bidi or other hidden
characters (U+202E RIGHT-TO-LEFT OVERRIDE, U+2066..U+2069 isolates, U+200F RIGHT-TO-LEFT
MARK...) are drawn with those characters visible, as marked ⟨U+202E⟩ spans
(sessions/visible.py), on the chat page and in the frames the socket and the polling
fallback send; ordinary right-to-left letters (Arabic, Hebrew) are drawn as they are. Shown
raw, "report⟨U+202E⟩txt.exe" reads as "reportexe.txt" ("Trojan Source"). Real turns on the
provider simulator through the runner; pages and frames read with the test client. The
streamed text.delta frames carry the raw text, which static/chat.js escapes with the same
set (tests/browser/test_visible_text.py)."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from sessions.models import Message, Turn
from sessions.services import session_create, turn_start
from sessions.tasks import turn_run_task
from sessions.visible import has_hidden, visible_markup, visible_spec, visible_text
from simulator.script import Reply, Script, ScriptRule, ToolCallSpec

pytestmark = pytest.mark.django_db(transaction=True)

RLO = "\u202e"
HIDDEN = ("\u202e", "\u2066", "\u2069", "\u200f", "\u200b")
ARABIC, HEBREW = "مرحبا بالعالم", "שלום עולם"
REPLY = (f"Done: the file is **report{RLO}txt.exe**, see `a\u2066b\u2069c` "
         f"and [link](https://example.com \"t{RLO}x\"). {ARABIC} \u200f{HEBREW}\u200b.")
COMMAND = f"printf 'report{RLO}txt.exe\\n'"


def mark(name: str) -> str:
    return f'<span class="ctl" title="hidden character">⟨{name}⟩</span>'


@pytest.fixture
def alice(make_user, hermes_settings):
    hermes_settings.HERMES = {**hermes_settings.HERMES, "BACKEND": "local"}
    return make_user("alice", team="red")


def run_turn(user, text: str):
    session = session_create(user=user)
    turn_start(session=session, user=user, text=text)
    turn_run_task.apply(args=[session.pk])
    return session, Turn.objects.filter(session=session).order_by("-id").first()


def scripted(simulator, command: str = COMMAND) -> None:
    """The model runs ``command`` (its text before the call holds a U+202E too), then
    answers REPLY once the output came back."""
    simulator.state.script = Script([
        ScriptRule(reply=Reply(text=REPLY), tool_result="report"),
        ScriptRule(reply=Reply(text=f"Listing {RLO}files. ", tool_calls=(ToolCallSpec(
            name="terminal", input={"command": command}),)))])


def without_edit_boxes(page: str) -> str:
    """``page`` without the values its forms send: a <textarea> holds the message to edit
    and send again, a choice button's ``value`` is the answer it sends, so both keep the
    characters as they are (escaping them would change what is sent); neither is the text
    a reader sees as the message or the choice."""
    page = re.sub(r"(<textarea[^>]*>)[^<]*(</textarea>)", r"\1\2", page)
    return re.sub(r'(<button[^>]* value=")[^"]*(")', r"\1\2", page)


def raw_hidden(text: str) -> list[str]:
    return [hex(ord(c)) for c in HIDDEN if c in text]


def test_a_reply_and_a_tools_arguments_and_output_show_hidden_characters(
        simulator, alice, client):
    scripted(simulator)
    session, turn = run_turn(alice, f"show the report {RLO}please")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    stored = Message.objects.filter(session=session, role="tool").get()
    assert f"report{RLO}txt.exe" in stored.content  # stored (and sent to the model) as is
    client.force_login(alice)
    page = client.get(reverse("session_detail", args=[session.pk])).content.decode()
    assert raw_hidden(without_edit_boxes(page)) == []
    body = page[page.index('id="transcript"'):]
    assert f"<strong>report{mark('U+202E')}txt.exe</strong>" in body  # the reply
    assert f"<code>a{mark('U+2066')}b{mark('U+2069')}c</code>" in body  # inline code
    assert 'title="t⟨U+202E⟩x"' in body  # inside a tag: the plain escape, no span
    assert f"{ARABIC} {mark('U+200F')}{HEBREW}{mark('U+200B')}" in body  # RTL letters stay
    assert f"Listing {mark('U+202E')}files." in body  # the text before the call
    assert f"show the report {mark('U+202E')}please" in body  # the user's own message
    card = body[body.index('class="tool-card"'):]
    card = card[:card.index("</details>")]
    args = card[card.index('class="tool-args"'):card.index('class="tool-output"')]
    assert f"report{mark('U+202E')}txt.exe" in args  # the command in the arguments
    output = card[card.index('class="tool-output"'):]
    assert f"report{mark('U+202E')}txt.exe" in output  # what the command printed
    assert f"data-visible=\"{visible_spec().replace(chr(34), '&quot;')}\"" in page

    # The frames the socket and the polling fallback send (sessions/rendering.py
    # event_frame): every rendered fragment is visible-safe too.
    frames = client.get(reverse("event_list", args=[session.pk]),
                        {"after": 0}).json()["events"]
    rendered = [f for f in frames if f.get("html")]
    assert {"message.added", "tool.called", "tool.result"} <= {f["type"] for f in rendered}
    for frame in rendered:
        assert raw_hidden(without_edit_boxes(frame["html"])) == [], frame["type"]
    result = next(f["html"] for f in rendered if f["type"] == "tool.result")
    assert f"report{mark('U+202E')}txt.exe" in result
    reply = [f["html"] for f in rendered if f["type"] == "message.added"][-1]
    assert f"<strong>report{mark('U+202E')}txt.exe</strong>" in reply
    deltas = "".join(f["payload"]["text"] for f in frames if f["type"] == "text.delta")
    assert RLO in deltas  # raw on the wire: static/chat.js escapes it (the browser test)


def test_an_approval_card_shows_the_commands_hidden_characters(simulator, alice, client):
    """A command the policy sends to a human: the card in the chat (page and frame) shows
    its U+202E as a mark, and so does the tool card's argument."""
    scripted(simulator, command=f"sudo cat 'notes{RLO}txt.sh'")
    session, turn = run_turn(alice, "read the notes")
    assert turn.status == Turn.Status.AWAITING_APPROVAL, turn.error
    client.force_login(alice)
    page = client.get(reverse("session_detail", args=[session.pk])).content.decode()
    import sys; sys.path.insert(0, "/tmp"); import esc_dbg; esc_dbg.show(page)
    assert raw_hidden(page) == []
    card = page[page.index('class="approval-card"'):]
    card = card[:card.index("</article>")]
    assert f"notes{mark('U+202E')}txt.sh" in card
    frames = client.get(reverse("event_list", args=[session.pk]),
                        {"after": 0}).json()["events"]
    requested = [f for f in frames if f["type"] == "approval.requested"]
    assert requested and all(raw_hidden(without_edit_boxes(f["html"])) == []
                             for f in requested)
    assert re.search(re.escape(f"notes{mark('U+202E')}txt.sh"), requested[-1]["html"])


@pytest.mark.django_db(transaction=False)
def test_the_browsers_set_is_the_servers_set():
    """static/chat.js builds its RegExp from visible_spec(): read back as a Python class,
    it matches exactly the code points has_hidden does (every plane), and names the same."""
    spec = json.loads(visible_spec())
    python_class = re.sub(r"\\u\{([0-9a-f]+)\}", lambda m: re.escape(chr(int(m.group(1), 16))),
                          spec["pattern"])
    browser = re.compile(python_class)
    differ = [hex(cp) for cp in range(0x110000) if 0xD800 > cp or cp > 0xDFFF
              if bool(browser.match(chr(cp))) != has_hidden(chr(cp))]
    assert differ == []
    assert {chr(int(k)): v for k, v in spec["names"].items()} == {
        c: visible_text(c)[1:-1] for c in map(chr, range(0x80)) if has_hidden(c)
        and not visible_text(c).startswith("⟨U+")}


@pytest.mark.django_db(transaction=False)
def test_markup_marks_text_but_keeps_tags_whole():
    """visible_markup on serialised HTML: spans in text, plain escapes inside a tag (an
    attribute holding ">" included), nothing changed when nothing is hidden."""
    html = '<a href="https://x.example/" title="a>\u202eb">x\u202e&lt;y</a>\u2067'
    assert str(visible_markup(html)) == (
        '<a href="https://x.example/" title="a>⟨U+202E⟩b">x'
        f"{mark('U+202E')}&lt;y</a>{mark('U+2067')}")
    plain = "<p>مرحبا <strong>שלום</strong></p>"
    assert str(visible_markup(plain)) == plain


def test_the_todo_and_clarify_panels_show_hidden_characters(simulator, alice, client):
    """The model's todo items and its clarify question and choices (server-rendered panels,
    which static/todo.js and clarify.js re-fetch whole) are visible-safe too."""
    simulator.state.script = Script([
        ScriptRule(reply=Reply(text="Planned."), tool_result="."),
        ScriptRule(user="plan", reply=Reply(tool_calls=(ToolCallSpec(name="todo", input={
            "todos": [{"id": "1", "content": f"Delete report{RLO}txt.exe"}]}),))),
        ScriptRule(user="ask", reply=Reply(tool_calls=(ToolCallSpec(name="clarify", input={
            "question": f"Run evil{RLO}gnp.sh?", "choices": [f"yes{RLO}on", "no"]}),)))])
    session, turn = run_turn(alice, "plan it")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    turn_start(session=session, user=alice, text="ask me")
    turn_run_task.apply(args=[session.pk])
    client.force_login(alice)
    page = client.get(reverse("session_detail", args=[session.pk])).content.decode()
    assert raw_hidden(without_edit_boxes(page)) == []
    todo = page[page.index('id="todo-panel"'):]
    assert f"Delete report{mark('U+202E')}txt.exe" in todo[:todo.index("</aside>")]
    card = page[page.index('class="clarify-card"'):]
    card = card[:card.index("</section>")]
    assert f"Run evil{mark('U+202E')}gnp.sh?" in card
    assert f">yes{mark('U+202E')}on</button>" in card


def test_the_files_panel_shows_hidden_characters_in_names_and_previews(simulator, alice,
                                                                       client):
    """Files the model wrote with a U+202E in the name ("report⟨U+202E⟩txt.exe" would
    read "reportexe.txt") and in the content: the panel's list, the preview's heading, a
    plain preview and a highlighted (Python) one show it as a mark."""
    simulator.state.script = Script([
        ScriptRule(reply=Reply(text="Written."), tool_result="."),
        ScriptRule(reply=Reply(tool_calls=(
            ToolCallSpec(name="write_file", input={"path": f"report{RLO}txt.exe",
                                                   "content": f"plain {RLO}text\n"}),
            ToolCallSpec(name="write_file", input={"path": "tool.py",
                                                   "content": f"x = 'a{RLO}b'\n"}))))])
    session, turn = run_turn(alice, "write the files")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    client.force_login(alice)
    url = reverse("session_files", args=[session.pk])
    listing = client.get(url).content.decode()
    preview = client.get(url, {"path": f"report{RLO}txt.exe"}).content.decode()
    code = client.get(url, {"path": "tool.py"}).content.decode()
    for page in (listing, preview, code):
        assert raw_hidden(page.replace("%E2%80%AE", "")) == []  # URLs are percent-encoded
        assert f">report{mark('U+202E')}txt.exe</a>" in page
        assert 'title="report⟨U+202E⟩txt.exe"' in page
    assert f"<strong>report{mark('U+202E')}txt.exe</strong>" in preview
    assert f"<code>plain {mark('U+202E')}text" in preview
    assert f"a{mark('U+202E')}b" in code and 'class="language-python"' in code


def test_search_results_show_hidden_characters(simulator, alice, client):
    """A message found by search: its excerpt (with the <mark> of the match) shows the
    reply's U+202E as a mark."""
    simulator.state.script = Script([ScriptRule(reply=Reply(
        text=f"The zebrafile is report{RLO}txt.exe here."))])
    session, turn = run_turn(alice, "where is it")
    assert turn.status == Turn.Status.COMPLETED, turn.error
    client.force_login(alice)
    page = client.get(reverse("search"), {"q": "zebrafile"}).content.decode()
    excerpt = page[page.index('class="search-hits"'):]
    assert "<mark>" in excerpt and raw_hidden(page) == []
    assert f"report{mark('U+202E')}txt.exe" in excerpt
