"""The schema checkers (mcp_bridge.schema_pool): real worker processes, real deadlines.

And the gateway's choice between them and the event loop, made from what the catalogue
measured (``Tool.schema_refusal``, ``Tool.inline_check_values``)."""

from __future__ import annotations

import asyncio
import json
import os

import pytest

from mcp_bridge import gateway, schema_pool
from mcp_bridge.errors import InvalidArguments
from mcp_bridge.models import Tool
from mcp_bridge.schema import SchemaRefused, SchemaTooComplex, measure_input_schema
from mcp_bridge.schema_pool import SchemaPool
from tests.fixtures.mcp_servers.schema_bombs import nested_arguments, nested_choice_schema

SEARCH = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["query"],
}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def pool():
    checkers = SchemaPool(size=2, deadline=0.5)
    yield checkers
    checkers.close()


async def test_a_worker_checks_arguments_like_the_inline_check(pool: SchemaPool) -> None:
    assert await pool.validate({"query": "cats"}, SEARCH, tool="search") == []
    with pytest.raises(InvalidArguments) as raised:
        await pool.validate({"limit": "x"}, SEARCH, tool="search")
    assert raised.value.code == "invalid_arguments"
    assert "'query' is a required property" in raised.value.user_message
    warnings = await pool.validate({"a": 1}, {"type": 5}, tool="broken")
    assert warnings and "invalid" in warnings[0]
    (pid,) = pool.pids()
    assert pid != os.getpid() and _alive(pid)


async def test_a_check_past_its_deadline_kills_its_worker_and_a_new_one_takes_over(
    pool: SchemaPool,
) -> None:
    assert await pool.validate({"x": {}}, nested_choice_schema()) == []
    (before,) = pool.pids()
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    with pytest.raises(SchemaTooComplex) as raised:
        await pool.validate(nested_arguments(30), nested_choice_schema(), tool="bomb")
    ticker.cancel()
    assert raised.value.code == "schema_too_complex"
    assert raised.value.user_message == (
        "The server's input schema for the tool 'bomb' is too complex to check in time; "
        "the call was not made."
    )
    assert ticks > 100  # the loop ran all along
    assert pool.killed == [before] and not _alive(before)
    assert await pool.validate({"x": {"n": {}}}, nested_choice_schema()) == []
    assert before not in pool.pids()


async def test_a_worker_that_burns_its_cpu_allowance_is_ended_by_the_kernel() -> None:
    """The backstop for a parent that is gone (or stalled) while a check burns: each
    check may use only so many CPU seconds (RLIMIT_CPU), then SIGXCPU ends the worker."""
    checkers = SchemaPool(size=1, deadline=120, cpu_seconds=1)
    try:
        assert await checkers.validate({"x": {}}, nested_choice_schema()) == []
        (before,) = checkers.pids()
        with pytest.raises(SchemaTooComplex):
            await checkers.validate(nested_arguments(40), nested_choice_schema())
        assert checkers.killed == []  # not the deadline: the kernel
        assert not _alive(before)
        assert await checkers.validate({"x": {}}, nested_choice_schema()) == []
    finally:
        checkers.close()


async def test_checks_beyond_the_pool_size_wait_for_a_worker(pool: SchemaPool) -> None:
    results = await asyncio.gather(
        *(pool.validate({"query": f"q{i}"}, SEARCH) for i in range(6)),
        pool.validate(nested_arguments(30), nested_choice_schema()),
        return_exceptions=True,
    )
    assert results[:6] == [[]] * 6
    assert isinstance(results[6], SchemaTooComplex)
    assert len(pool.pids()) <= 2


async def test_a_cancelled_check_does_not_leave_its_worker_burning(pool: SchemaPool) -> None:
    assert await pool.validate({"x": {}}, nested_choice_schema()) == []
    (before,) = pool.pids()
    check = asyncio.ensure_future(pool.validate(nested_arguments(30), nested_choice_schema()))
    await asyncio.sleep(0.05)  # let it reach the worker (no assertion rests on this)
    check.cancel()
    with pytest.raises(asyncio.CancelledError):
        await check
    assert not _alive(before)
    assert await pool.validate({"query": "after"}, SEARCH) == []


async def test_closing_the_pool_leaves_no_process_behind(pool: SchemaPool) -> None:
    await asyncio.gather(*(pool.validate({"query": "q"}, SEARCH) for _ in range(4)))
    pids = pool.pids()
    assert pids
    pool.close()
    assert pool.pids() == [] and not any(_alive(pid) for pid in pids)


# ---- the gateway's choice ---------------------------------------------------------------


def _tool(schema, **fields) -> Tool:
    cost = measure_input_schema(schema)
    values = {"name": "t", "schema_refusal": cost.problem or ""}
    values.update(inline_check_values=cost.inline_nodes, **fields)
    return Tool(input_schema=schema, **values)


@pytest.fixture
def fresh_pool(monkeypatch):
    checkers = SchemaPool(deadline=0.5)
    monkeypatch.setattr(schema_pool, "_pool", checkers)
    yield checkers
    checkers.close()


async def test_a_cheap_schema_and_small_arguments_stay_on_the_event_loop(fresh_pool) -> None:
    tool = _tool(SEARCH)
    await gateway._validate({"query": "cats", "limit": 3}, tool)
    with pytest.raises(InvalidArguments):
        await gateway._validate({"limit": 3}, tool)
    assert fresh_pool.pids() == []  # no worker was needed
    # More values than the measure admits inline: a worker checks them.
    many = {"query": "q", **{f"k{i}": i for i in range(tool.inline_check_values)}}
    assert len(json.dumps(many)) < 8192
    await gateway._validate(many, tool)
    assert len(fresh_pool.pids()) == 1


async def test_a_costly_schema_always_goes_to_a_worker(fresh_pool) -> None:
    tool = _tool(nested_choice_schema())
    assert tool.inline_check_values == 0 and not tool.schema_refusal
    await gateway._validate({"x": {}}, tool)
    assert len(fresh_pool.pids()) == 1
    with pytest.raises(SchemaTooComplex):
        await gateway._validate(nested_arguments(30), tool)


async def test_a_refused_schema_refuses_the_call_without_checking(fresh_pool) -> None:
    tool = _tool({"anyOf": [{"const": i} for i in range(2000)]}, name="wide")
    with pytest.raises(SchemaRefused) as raised:
        await gateway._validate({}, tool)
    assert raised.value.code == "schema_refused"
    assert raised.value.user_message.startswith(
        "The tool 'wide' cannot be called: the tool's input schema is too complex to check:"
    )
    assert fresh_pool.pids() == []
