"""Approvals: the durable human gate for tool calls the policy marked "ask"."""

from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        # sessions/ resumes and cancels approval waits, reads the gate state and draws
        # approval cards through hooks it owns, never by importing approvals/ (issue 11
        # item 2: arrows point down).
        from approvals import rendering, services
        from sessions.hooks import approvals_register
        from sessions.waits import wait_register

        wait_register(services.APPROVAL_WAIT)
        approvals_register(
            gate_state=services.gate_state, requests_create=services.approval_request_create,
            rule_hit=services.rule_hit,
            audit=lambda *, action, session, detail: services._audit(
                actor=None, action=action, session=session, detail=detail),
            event_html=rendering.approval_event_html,
            states=rendering.session_approval_states, cards_html=rendering.session_cards_html)
