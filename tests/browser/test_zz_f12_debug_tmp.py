import pytest
from tests.browser import test_views as views
from tests.browser.test_views import call_tool, goto_thread, view_row
from tests.browser.helpers_ui import CSP_WATCH_JS, login

world = views.world
pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.mark.parametrize("n", [1, 2, 3])
def test_debug(browser, world, n):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
    context.add_init_script(CSP_WATCH_JS)
    page = context.new_page()
    msgs = []
    page.on("console", lambda m: msgs.append(f"{m.type} {(m.location or {}).get('url','')[:80]} {m.text[:300]}"))
    page.on("websocket", lambda ws: ws.on("framesent", lambda p: msgs.append("WS> " + str(p)[:200])) and ws.on("framereceived", lambda p: msgs.append("WS< " + str(p)[:200])))
    login(page, world.origin, "olivia", world.password)
    goto_thread(page, world, "basic")
    page.evaluate("() => { window.__seen = []; window.addEventListener('message', e => window.__seen.push([e.origin, e.data && e.data.method, e.data && e.data.id])); }")
    call_tool(page, "basic.get-time")
    row = view_row(page, "get-time")
    row.wait_for(timeout=60000)
    page.wait_for_timeout(6000)
    print("SEEN", n, page.evaluate("() => JSON.stringify(window.__seen)"))
    print("VIEWS", n, page.evaluate("() => JSON.stringify(window.AtriumAppViews.list())"))
    for m in msgs:
        print("MSG", n, m)
    context.close()
