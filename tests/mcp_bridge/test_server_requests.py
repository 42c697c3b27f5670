"""A server's own requests (elicitation, sampling) reach the handler of the call they belong
to, or the server gets an error — never someone else's answer (mcp_bridge.server_requests)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_bridge.connections import ConnectionManager
from mcp_bridge.errors import ToolReturnedError
from mcp_bridge.server_requests import (
    InboundRequest,
    InboundRequestRefused,
    InboundRoutes,
    current_handler,
)
from mcp_bridge.server_spec import ServerSpec

ASKING = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_servers" / "asking.py"


def text_of(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result.get("content", []))


def spec(mode: str = "legacy") -> ServerSpec:
    return ServerSpec.create("asking", command=sys.executable, args=(str(ASKING),), mode=mode)


@pytest.fixture
async def manager():
    async with ConnectionManager(inbound_kinds=frozenset({"elicitation", "sampling"})) as found:
        yield found


# ---- routing, pure ---------------------------------------------------------------------


async def _answer(_request: InboundRequest) -> dict[str, Any]:
    return {}


async def test_one_call_in_flight_gets_the_request() -> None:
    routes = InboundRoutes()
    with routes.route(_answer):
        assert routes.handler_for("elicitation") is _answer
    with pytest.raises(InboundRequestRefused, match="none is"):
        routes.handler_for("elicitation")


async def test_two_calls_in_flight_refuse_rather_than_guess() -> None:
    routes = InboundRoutes()

    async def other(_request: InboundRequest) -> dict[str, Any]:
        return {}

    async def in_another_task() -> None:
        with routes.route(other):
            await asyncio.sleep(0)
            # This task's own handler is known from its context even with two in flight.
            assert current_handler() is other

    with routes.route(_answer):
        await asyncio.gather(in_another_task())
    routes_two = InboundRoutes()
    with routes_two.route(_answer):
        second = routes_two.route(other)
        second.__enter__()
        try:
            # Seen from a task that runs neither call (the SDK's reader task):
            result: list[BaseException] = []

            def probe() -> None:
                try:
                    routes_two.handler_for("sampling")
                except InboundRequestRefused as exc:
                    result.append(exc)

            await asyncio.get_running_loop().run_in_executor(None, probe)
            assert result and "Several calls" in str(result[0])
        finally:
            second.__exit__(None, None, None)


# ---- through a real server -------------------------------------------------------------


async def test_elicitation_reaches_the_calls_handler(manager: ConnectionManager) -> None:
    seen: list[InboundRequest] = []

    async def handler(request: InboundRequest) -> dict[str, Any]:
        seen.append(request)
        return {"action": "accept", "content": {"name": "Ana"}}

    result = await manager.call_tool(
        spec(), "ask", {"question": "Your name?"}, on_server_request=handler
    )
    assert text_of(result) == "accept:Ana"
    assert [r.kind for r in seen] == ["elicitation"]
    assert seen[0].params["message"] == "Your name?"
    assert seen[0].params["requestedSchema"]["properties"]["name"]["type"] == "string"


async def test_sampling_reaches_the_calls_handler(manager: ConnectionManager) -> None:
    async def handler(request: InboundRequest) -> dict[str, Any]:
        assert request.kind == "sampling"
        asked = request.params["messages"][0]["content"]["text"]
        return {
            "role": "assistant",
            "content": {"type": "text", "text": f"echo {asked}"},
            "model": "m",
        }

    result = await manager.call_tool(spec(), "sample", {"prompt": "hi"}, on_server_request=handler)
    assert text_of(result) == "echo hi"


async def test_a_call_without_a_handler_gets_an_error_not_an_answer(
    manager: ConnectionManager,
) -> None:
    with pytest.raises(ToolReturnedError, match="none is"):
        await manager.call_tool(spec(), "ask", {"question": "Your name?"})


async def test_a_handlers_refusal_reaches_the_server(manager: ConnectionManager) -> None:
    async def handler(_request: InboundRequest) -> dict[str, Any]:
        raise InboundRequestRefused("No model is configured")

    with pytest.raises(ToolReturnedError, match="No model is configured"):
        await manager.call_tool(spec(), "sample", {"prompt": "hi"}, on_server_request=handler)


async def test_capabilities_declared_exactly() -> None:
    async with ConnectionManager(inbound_kinds=frozenset({"elicitation"})) as only_elicitation:
        declared = json.loads(text_of(await only_elicitation.call_tool(spec(), "capabilities")))
    assert set(declared["elicitation"]) == {"form", "url"}
    assert "sampling" not in declared and "roots" not in declared
    async with ConnectionManager() as nothing:
        declared = json.loads(text_of(await nothing.call_tool(spec(), "capabilities")))
    assert "elicitation" not in declared and "sampling" not in declared


async def test_a_request_naming_its_task_goes_to_that_tasks_reader() -> None:
    routes = InboundRoutes()

    async def other(_request: InboundRequest) -> dict[str, Any]:
        return {}

    def from_reader_task(params: dict[str, Any]) -> Any:
        found: list[Any] = []

        def probe() -> None:
            try:
                found.append(routes.handler_for("elicitation", params))
            except InboundRequestRefused as exc:
                found.append(exc)

        return asyncio.get_running_loop().run_in_executor(None, probe), found

    with routes.route(_answer, task_id="t-1"), routes.route(other, task_id="t-2"):
        meta = {"_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t-2"}}}
        waiting, found = from_reader_task(meta)
        await waiting
        assert found == [other]
        # Without a task named, two readers in flight stay ambiguous.
        waiting, found = from_reader_task({})
        await waiting
        assert isinstance(found[0], InboundRequestRefused)


async def test_the_gateway_declares_sampling_with_tools_elicitation_and_no_roots() -> None:
    from mcp_bridge import gateway

    try:
        declared = json.loads(text_of(await gateway.manager().call_tool(spec(), "capabilities")))
    finally:
        await gateway.close_all()
    assert declared["sampling"] == {"tools": {}}
    assert set(declared["elicitation"]) == {"form", "url"}
    assert "roots" not in declared
