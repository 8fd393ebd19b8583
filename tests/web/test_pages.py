"""The web page in a real browser against a real dtxd (docs/web.md): an exploration created
from the form and watched to its end over server-sent events, its chart with bars, error marks
and baseline lines, the ranked table, a schedule and its code, two schedules compared, a
diagnostic of a broken template at its line, cancel, and shared URLs."""
import json
import os
import pathlib
import re
import shutil
import time
import urllib.request

import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from dtxd import ROOT, serving

# Browser fixtures: headless Chromium (Debian's `chromium`, driven through Selenium and Debian's
# `chromium-driver`). Screenshots go to build/test-artifacts/web/ (or $DTX_ARTIFACTS/web/), one
# per step, named after the test.
ARTIFACTS = pathlib.Path(os.environ.get("DTX_ARTIFACTS", ROOT / "build" / "test-artifacts")) / "web"
CHROMIUM = os.environ.get("CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", shutil.which("chromedriver") or "/usr/bin/chromedriver")


@pytest.fixture(scope="session")
def web_daemon(tmp_path_factory):
    yield from serving(tmp_path_factory.mktemp("dtxd-web"), "--compile-workers", "1")


@pytest.fixture(scope="session")
def driver():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is not installed; run deploy/setup.sh")
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not pathlib.Path(path).exists():
            pytest.fail(f"{path} is missing: install Debian's {package} (deploy/setup.sh does)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1440,1000", "--lang=en-US"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    d.set_page_load_timeout(60)
    yield d
    d.quit()


@pytest.fixture
def browser(driver, web_daemon, request):
    """The browser, with `shot(name)` saving a screenshot of the page, and a check at the end
    that the page logged no error (a failed request, an exception in the page's code)."""
    def shot(name):
        driver.save_screenshot(str(ARTIFACTS / f"{request.node.name}-{name}.png"))

    def shots(name, scroll_to=None):
        """The view at 1600 and at 800 px wide (the width stays 800 after, for checks)."""
        for width in (1600, 800):
            driver.set_window_size(width, 1000)
            if scroll_to:
                driver.execute_script("document.querySelector(arguments[0]).scrollIntoView()", scroll_to)
            time.sleep(0.3)  # the charts follow the window's size
            driver.save_screenshot(str(ARTIFACTS / f"{request.node.name}-{name}-{width}.png"))

    driver.shot = shot
    driver.shots = shots
    driver.set_window_size(1440, 1000)
    driver.base = web_daemon.base
    driver.allowed_errors = []  # regexes of errors a test provokes on purpose
    driver.get_log("browser")  # drop what earlier tests left
    yield driver
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"
              and not any(re.search(p, e["message"]) for p in driver.allowed_errors)]
    assert not errors, f"the page logged errors: {errors}"


# A 12-point space of GeGLU (8 distinct schedules after the `where`) at interpreter sizes.
TEMPLATE = """\
$BY = {32, 64, 128};
geglu.block(x:{1, 2}, y:$BY);
geglu.tensorize(x:0, y:{0, 64});
where geglu.tensorize.y == 0 or geglu.tensorize.y < $BY;
"""
SHAPES = ["x=4,y=96", "x=3,y=100"]
FAST = {"top": "2", "rounds": "2", "screen_warmup_ms": "1", "screen_rep_ms": "2",
        "full_warmup_ms": "1", "full_rep_ms": "2"}


def wait(driver, timeout=30):
    # The page redraws parts of itself while it runs: an element found a moment ago may be gone.
    return WebDriverWait(driver, timeout, poll_frequency=0.2,
                         ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))


def find(driver, css):
    return driver.find_element(By.CSS_SELECTOR, css)


def find_all(driver, css):
    return driver.find_elements(By.CSS_SELECTOR, css)


def set_text(driver, element, text):
    """Replaces a field's text as typing would (the input event fires once). The keyboard
    itself is tested where it matters (sorting, tabs, the live filter)."""
    driver.execute_script(
        "arguments[0].value = arguments[1];"
        "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));", element, text)


def open_form(driver):
    driver.get(driver.base + "/new")
    wait(driver).until(lambda d: find(d, "#editor-algorithm").get_attribute("value"))
    return driver


def fill_form(driver, kernel, template, shapes, strategy="exhaustive", budget=None):
    set_text(driver, find(driver, "#kernel"), kernel)
    set_text(driver, find(driver, "#editor-schedule-template"), template)
    set_text(driver, find(driver, "#shapes"), "\n".join(shapes))
    Select(find(driver, "#strategy")).select_by_value(strategy)
    set_text(driver, find(driver, "#budget"), "" if budget is None else str(budget))
    for name in ("torch", "torch.compile", "reference"):
        box = find(driver, "#baseline-" + name.replace(".", "\\."))
        if box.is_selected() != (name != "torch.compile"):
            box.click()
    driver.execute_script("document.querySelector('details.advanced').open = true")
    for field, value in FAST.items():
        set_text(driver, find(driver, f"#{field}"), value)


@pytest.fixture(scope="module")
def explored(driver, web_daemon):
    """An exploration of two shapes created from the form and watched until it is done; the
    ids of its explorations."""
    driver.base = web_daemon.base
    open_form(driver)
    fill_form(driver, "geglu", TEMPLATE, SHAPES)
    # Validated as typed: the space at the first shape, through /v1/expand.
    wait(driver).until(lambda d: find(d, "#distinct").text == "8")
    assert "pruned: 4 by where" in find(driver, "#space").text
    assert "compiles" in find(driver, ".editor-field .editor-status").text
    driver.save_screenshot(str(ARTIFACTS / "explored-form.png"))
    find(driver, "#submit").click()
    wait(driver).until(lambda d: re.search(r"/explorations/\d+,\d+", d.current_url))
    ids = [int(i) for i in re.search(r"/explorations/([\d,]+)", driver.current_url).group(1).split(",")]
    # Live, without a reload: the marker set now survives until the end.
    driver.execute_script("window.__sameDocument = true")
    wait(driver, 60).until(lambda d: find_all(d, ".progress-section .progress")
                           or find_all(d, "section.panel[data-finished]"))
    driver.save_screenshot(str(ARTIFACTS / "explored-running.png"))
    wait(driver, 600).until(lambda d: find_all(d, f"#panel-{ids[0]}[data-finished]"))
    assert driver.execute_script("return window.__sameDocument === true")
    return ids


def test_form_creates_an_exploration_that_runs_to_the_end(browser, explored):
    first, second = explored
    assert find(browser, ".badge").text == "done"
    # One tab per shape; the second finishes too.
    tabs = find_all(browser, "[role=tab]")
    assert [t.text for t in tabs] == SHAPES
    browser.shot("done")
    tabs[1].click()
    wait(browser, 600).until(lambda d: find_all(d, f"#panel-{second}[data-finished]"))
    assert browser.current_url.endswith(f"#{second}")
    browser.shot("second-shape")
    # The list shows both, done, newest first.
    browser.get(browser.base + "/explorations?kernel=geglu")
    rows = wait(browser).until(lambda d: find_all(d, "table.explorations tbody tr"))
    assert [int(r.get_attribute("data-id")) for r in rows] == [second, first]
    assert all(r.get_attribute("data-state") == "done" for r in rows)
    assert "cpu-interpreter" in rows[0].text
    browser.shot("list")


def test_chart_has_bars_error_marks_and_baseline_lines(browser, explored):
    browser.get(f"{browser.base}/explorations/{explored[0]}")
    canvas = wait(browser).until(lambda d: find(d, "canvas[data-bars]"))
    wait(browser).until(lambda d: canvas.get_attribute("data-baselines"))
    assert canvas.get_attribute("data-bars") == "8"
    assert int(canvas.get_attribute("data-error-marks")) == 8
    assert set(canvas.get_attribute("data-baselines").split(",")) == {"reference", "torch"}
    legend = find(browser, "ul.legend").text
    assert "reference" in legend and "torch" in legend
    # Bars are sorted: the drawn data is non-decreasing.
    data = browser.execute_script("return Chart.getChart(arguments[0]).data.datasets[0].data", canvas)
    assert len(data) == 8 and data == sorted(data)
    # Only the times measured are offered: the interpreter has no CUDA graph, and host time
    # was not asked for.
    options = [o.text for o in Select(find(browser, "#metric")).options]
    assert options == ["do_bench"]
    # The thesis' measure of an easy space, and a log scale that keeps every line in view.
    assert re.fullmatch(r"\d+ of 8", find(browser, "[data-card=within] .card-value").text)
    find(browser, "#log-scale").click()
    wait(browser).until(lambda d: "log=1" in d.current_url)
    scale = browser.execute_script("return Chart.getChart(arguments[0]).scales.y.type", canvas)
    assert scale == "logarithmic"
    assert set(canvas.get_attribute("data-baselines").split(",")) == {"reference", "torch"}
    browser.shot("chart-log")


def test_ranked_table_sorts_and_filters(browser, explored):
    browser.get(f"{browser.base}/explorations/{explored[0]}")
    rows = wait(browser).until(lambda d: find_all(d, "table.ranked tbody tr"))
    assert len(rows) == 8
    assert [r.find_element(By.CSS_SELECTOR, "td:nth-child(2)").text for r in rows] == [str(i) for i in range(1, 9)]
    assert all(r.get_attribute("data-status") == "ok" for r in rows)
    # Keyboard: the Screen (time) header is a button; Enter sorts descending after ascending.
    header = find(browser, "button.sort[data-key=screen]")
    header.send_keys(Keys.ENTER)
    header = find(browser, "button.sort[data-key=screen]")
    header.send_keys(Keys.ENTER)
    times = [float(r.get_attribute("data-ms")) for r in find_all(browser, "table.ranked tbody tr")]
    assert len(times) == 8 and times == sorted(times, reverse=True)
    assert find(browser, "button.sort[data-key=screen]").find_element(By.XPATH, "..").get_attribute("aria-sort") == "descending"
    # Filter by statement text; the filter is kept in the URL.
    box = find(browser, "#schedule-filter")
    box.send_keys("y:128")
    wait(browser).until(lambda d: len(find_all(d, "table.ranked tbody tr")) < 8)
    assert all("y:128" in r.text for r in find_all(browser, "table.ranked tbody tr"))
    wait(browser).until(lambda d: "q=y%3A128" in d.current_url)
    browser.shot("filtered")


def test_schedule_page_shows_the_program_the_code_and_ci_lines(browser, explored, web_daemon):
    browser.get(f"{browser.base}/explorations/{explored[0]}")
    link = wait(browser).until(lambda d: find(d, "table.ranked tbody tr td.canonical a"))
    canonical = link.text
    link.click()
    wait(browser).until(lambda d: re.search(r"/schedules/\d+$", d.current_url))
    sid = int(browser.current_url.rsplit("/", 1)[1])
    code = wait(browser).until(lambda d: find(d, "[aria-label='generated Triton module'] code"))
    assert code.get_attribute("data-highlighted") == "yes"
    assert "@triton.jit" in code.text
    assert find_all(browser, "[aria-label='generated Triton module'] code span.hljs-keyword")
    program = find(browser, "[aria-label='DT program'] code").text
    assert "geglu.compile();" in program
    for statement in canonical.split(";"):
        assert statement + ";" in program
    # Every measurement with its device and versions.
    rows = find_all(browser, "table.measurements tbody tr")
    assert rows and all("cpu-interpreter" in r.text and "3.6" in r.text for r in rows)
    # The CI lines, and what the curl line fetches is the module the API has.
    lines = [c.text for c in find_all(browser, ".ci-line code")]
    assert lines[0] == f"dtx best geglu --shape x=4,y=96 --dtype float32 --server {web_daemon.base} -o geglu.py"
    url = re.search(r"'(http[^']+/v1/best[^']+)'", lines[1]).group(1)
    best = json.loads(urllib.request.urlopen(url, timeout=30).read())
    assert best["kernel"] == "geglu" and "@triton.jit" in best["module"]
    schedule = json.loads(urllib.request.urlopen(f"{web_daemon.base}/v1/schedules/{sid}", timeout=30).read())
    assert code.text.strip() == schedule["module"].strip()
    browser.shot("schedule")
    # Download writes the module as it is stored, byte for byte.
    downloads = ARTIFACTS / "downloads"
    shutil.rmtree(downloads, ignore_errors=True)
    downloads.mkdir()
    browser.execute_cdp_cmd("Browser.setDownloadBehavior",
                            {"behavior": "allow", "downloadPath": str(downloads)})
    section = find(browser, "section[aria-label='generated code']")
    section.find_element(By.XPATH, ".//button[text()='Download']").click()
    wait(browser).until(lambda d: (downloads / "geglu.py").exists())
    assert (downloads / "geglu.py").read_text() == schedule["module"]


def test_compare_two_schedules(browser, explored):
    browser.get(f"{browser.base}/explorations/{explored[0]}")
    rows = wait(browser).until(lambda d: find_all(d, "table.ranked tbody tr"))
    a, b = int(rows[0].get_attribute("data-id")), int(rows[-1].get_attribute("data-id"))
    rows[0].find_element(By.CSS_SELECTOR, "input[type=checkbox]").click()
    rows[-1].find_element(By.CSS_SELECTOR, "input[type=checkbox]").click()
    find(browser, "#compare").click()
    wait(browser).until(lambda d: d.current_url.endswith(f"/compare/{a}/{b}"))
    wait(browser).until(lambda d: find_all(d, ".diff tr.add") and find_all(d, ".diff tr.del"))
    assert find_all(browser, "ol.statements li.changed.a") and find_all(browser, "ol.statements li.changed.b")
    times = find(browser, "table.times").text
    assert "do_bench" in times
    browser.shot("compare")
    # The URL is shareable: a fresh load shows the same comparison.
    browser.get(f"{browser.base}/compare/{a}/{b}")
    wait(browser).until(lambda d: find_all(d, ".diff tr.add"))


def test_form_starts_from_a_template_sized_for_the_interpreter(browser):
    open_form(browser)
    # No GPU on this server: the template's largest test shape and a small random budget.
    assert "Triton interpreter" in find(browser, "#interpreter-note").text
    assert find(browser, "#shapes").get_attribute("value") == "x=3,y=1000"
    assert Select(find(browser, "#strategy")).first_selected_option.get_attribute("value") == "random"
    assert find(browser, "#budget").get_attribute("value") == "12"
    wait(browser).until(lambda d: find(d, "#distinct").text)
    assert int(find(browser, "#distinct").text.replace(",", "")) > 12
    # Another template replaces every field, and the URL says which.
    Select(find(browser, "#from")).select_by_value("softmax")
    wait(browser).until(lambda d: d.current_url.endswith("/new?from=softmax"))
    assert find(browser, "#kernel").get_attribute("value") == "softmax"
    assert "softmax" in find(browser, "#editor-algorithm").get_attribute("value")
    status = ".editor-field:has(#editor-schedule-template) .editor-status"
    try:
        wait(browser).until(lambda d: "schedules at x=" in find(d, status).text)
    finally:
        browser.shot("softmax")


def test_broken_template_and_algorithm_show_diagnostics_at_their_line(browser):
    open_form(browser)
    broken = TEMPLATE.replace("geglu.tensorize(x:0, y:{0, 64});", "geglu.tensorize(x:0, y:{0, 64);")
    set_text(browser, find(browser, "#editor-schedule-template"), broken)
    marked = wait(browser).until(
        lambda d: find_all(d, ".editor:has(#editor-schedule-template) .gutter span.marked"))
    assert [m.get_attribute("data-line") for m in marked] == ["3"]
    item = find(browser, "#editor-schedule-template-diagnostics li")
    assert item.text.startswith("3:") and "error" in item.text
    browser.shot("template-diagnostic")
    # Submitting anyway: the error stays at its line and nothing is created.
    set_text(browser, find(browser, "#kernel"), "geglu_broken")
    browser.allowed_errors.append("/v1/(expand|explorations) - Failed to load resource")
    find(browser, "#submit").click()
    wait(browser).until(lambda d: find(d, "#submit-error").text)
    assert "template" in find(browser, "#submit-error").text
    assert browser.current_url.endswith("/new")
    # The algorithm: an unknown name at line 9 of geglu.dt.
    algorithm = find(browser, "#editor-algorithm")
    text = algorithm.get_attribute("value").replace("* B[x, y];", "* C[x, y];")
    set_text(browser, algorithm, text)
    item = wait(browser).until(lambda d: find(d, "#editor-algorithm-diagnostics li"))
    line = text.splitlines().index(next(l for l in text.splitlines() if "C[x, y]" in l)) + 1
    assert item.text.startswith(f"{line}:")
    # Clicking the diagnostic puts the cursor on its line.
    item.find_element(By.CSS_SELECTOR, "button").click()
    cursor_line = browser.execute_script(
        "const t = arguments[0]; return t.value.slice(0, t.selectionStart).split('\\n').length", algorithm)
    assert cursor_line == line
    browser.shot("algorithm-diagnostic")


def test_cancel_a_running_exploration(browser):
    open_form(browser)
    big = "geglu.block(x:{1, 2, 4}, y:{16..128});\ngeglu.num_warps({1, 2, 4});\n"
    fill_form(browser, "geglu_cancel", big, ["x=4,y=128"], strategy="random", budget=200)
    set_text(browser, find(browser, "#screen_rep_ms"), "1500")  # running long enough to cancel
    wait(browser).until(lambda d: find(d, "#distinct").text)
    find(browser, "#submit").click()
    wait(browser).until(lambda d: re.search(r"/explorations/\d+$", d.current_url))
    button = wait(browser, 60).until(EC.element_to_be_clickable((By.ID, "cancel")))
    button.click()
    wait(browser, 120).until(lambda d: find(d, ".badge").text == "cancelled")
    browser.shot("cancelled")


def test_live_refresh_keeps_the_keyboard_focus_and_typed_text(browser, web_daemon):
    # A running exploration refreshes its chart and table every two seconds; someone working
    # in the page with the keyboard keeps their place and what they type.
    body = {"kernel": "geglu_live", "algorithm": (ROOT / "templates" / "geglu.dt").read_text(),
            "schedule": TEMPLATE, "shapes": [{"x": 4, "y": 96}], "strategy": "exhaustive",
            "baselines": ["reference"], "screen_warmup_ms": 1, "screen_rep_ms": 1500, "top": 0}
    status, created = web_daemon.post("/v1/explorations", body)
    assert status == 202
    browser.get(f"{browser.base}/explorations/{created['id']}")
    wait(browser).until(lambda d: find_all(d, ".progress-section .progress"))
    sort = find(browser, "button.sort[data-key=screen]")
    sort.send_keys(Keys.ENTER)  # focus stays on it, sorted by time
    # A refresh: one more schedule measured (each takes 1.5 s of timing).
    measured = "return document.querySelectorAll('table.ranked tbody tr[data-ms]').length"
    before = browser.execute_script(measured)
    wait(browser, 120).until(lambda d: d.execute_script(measured) > before)
    active = browser.switch_to.active_element
    assert active.get_attribute("data-key") == "screen", active.get_attribute("outerHTML")
    box = find(browser, "#schedule-filter")
    for ch in "geglu.block(x:1":
        box.send_keys(ch)
        time.sleep(0.15)
    time.sleep(2.5)  # at least one refresh after the last key
    assert find(browser, "#schedule-filter").get_attribute("value") == "geglu.block(x:1"
    assert browser.switch_to.active_element.get_attribute("id") == "schedule-filter"
    browser.shot("live-focus")
    web_daemon.post(f"/v1/explorations/{created['id']}/cancel")


def test_one_missing_exploration_leaves_the_others(browser, explored):
    browser.allowed_errors.append("Failed to load resource")
    browser.get(f"{browser.base}/explorations/999999,{explored[0]}")
    box = wait(browser).until(lambda d: find(d, "#panel-999999 .error-box"))
    assert "no exploration 999999" in box.text
    tabs = find_all(browser, "[role=tab]")
    tabs[1].click()
    wait(browser).until(lambda d: find_all(d, f"#panel-{explored[0]}[data-finished]"))
    assert find(browser, f"#panel-{explored[0]} canvas").get_attribute("data-bars") == "8"


def test_shared_urls_and_errors_in_place(browser):
    browser.allowed_errors.append("Failed to load resource")
    browser.get(browser.base + "/explorations/999999")
    box = wait(browser).until(lambda d: find(d, ".error-box"))
    assert "no exploration 999999" in box.text
    browser.get(browser.base + "/no/such/page")
    wait(browser).until(lambda d: find(d, "h1").text == "Not found")
    browser.shot("not-found")
    # The page's assets come from dtxd itself: nothing from another origin.
    browser.get(browser.base + "/explorations")
    wait(browser).until(lambda d: find_all(d, "table.explorations, p.empty"))
    sources = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)")
    assert sources and all(s.startswith(browser.base) for s in sources), sources
    assert browser.execute_script("return typeof Chart") == "function"
    assert browser.execute_script("return typeof hljs") == "object"


def test_a_failed_exploration_shows_why(browser, web_daemon):
    """An exploration that cannot succeed (the reference of an algorithm reading program_id
    cannot run, so every check fails alike) ends failed, and its page says why."""
    status, created = web_daemon.post("/v1/explorations", {
        "kernel": "pid_page", "strategy": "exhaustive", "dtype": "float32",
        "algorithm": "Func f;\nIn A;\nVar x, y;\nf[x, y] = A[x, y] + program_id(0);\n"
                     "f.compile();\n",
        "schedule": "f.block(x:{1, 2, 4}, y:{8, 16, 32, 64});\n",
        "shapes": [{"x": 4, "y": 64}], "baselines": ["reference"],
        "screen_warmup_ms": 1, "screen_rep_ms": 2, "top": 1})
    assert status == 202, created
    browser.get(browser.base + f"/explorations/{created['id']}")
    wait(browser, 600).until(lambda d: find(d, ".badge").text == "failed")
    box = wait(browser).until(lambda d: find(d, "p.error-box"))
    assert "stopped early" in box.text and "cannot evaluate program_id" in box.text
    browser.shot("failed")


def test_a_space_too_large_to_count_is_shown_as_a_lower_bound(browser, web_daemon):
    """10^20 points: more than the 64-bit count the server sends, and past what a JavaScript
    number keeps exactly. The page says "at least", in the form and on the exploration."""
    overflowing = "".join(f"${v} = {{1..100000:+1}};\n" for v in "ABCD") + \
        "geglu.num_warps({4});\nwhere $A + $B + $C + $D > 0;\n"
    open_form(browser)
    set_text(browser, find(browser, "#kernel"), "geglu_overflow")
    set_text(browser, find(browser, "#editor-schedule-template"), overflowing)
    set_text(browser, find(browser, "#shapes"), "x=4,y=64")
    wait(browser).until(lambda d: "at least 1.8 × 10^19 points" in find(d, "#space").text)
    status, created = web_daemon.post("/v1/explorations", {
        "kernel": "geglu_overflow", "algorithm": (ROOT / "templates" / "geglu.dt").read_text(),
        "schedule": overflowing, "shapes": [{"x": 4, "y": 64}], "strategy": "random",
        "budget": 1, "baselines": [], "screen_warmup_ms": 1, "screen_rep_ms": 2, "top": 0})
    assert status == 202, created
    browser.get(browser.base + f"/explorations/{created['id']}")
    wait(browser, 600).until(lambda d: find(d, ".badge").text == "done")
    value = wait(browser).until(lambda d: find(d, "[data-card=space] .card-value"))
    assert value.text == "at least 9.2 × 10^18", value.text
    browser.shot("overflow")


# Every shipped template, at all of its shapes and test shapes, from the form: the page takes
# what the server takes (one set of rules, tests/server/test_template_rules.py). On a daemon of
# its own, so that nothing queued here slows the explorations above.
TEMPLATE_NAMES = sorted(p.stem for p in (ROOT / "templates").glob("*.yaml"))


@pytest.fixture(scope="module")
def form_daemon(tmp_path_factory):
    yield from serving(tmp_path_factory.mktemp("dtxd-form"), "--templates-dir", str(ROOT / "templates"))


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_every_template_goes_through_the_form(browser, form_daemon, name):
    status, listed = form_daemon.get("/v1/templates")
    t = next(t for t in listed["templates"] if t["name"] == name)
    shapes = t["test_shapes"] + t["shapes"]  # the first is expanded: the small one
    browser.get(f"{form_daemon.base}/new?from={name}")
    wait(browser).until(lambda d: find(d, "#kernel").get_attribute("value") == t["kernel"])
    browser.execute_script("document.querySelector('#space').replaceChildren()")
    set_text(browser, find(browser, "#shapes"),
             "\n".join(",".join(f"{k}={v}" for k, v in s.items()) for s in shapes))
    wait(browser, 120).until(lambda d: find_all(d, "#distinct")
                             or any(e.text for e in find_all(d, ".field-error")))
    errors = [e.text for e in find_all(browser, ".field-error") if e.text]
    assert not errors, errors
    browser.shot(name)
    find(browser, "#submit").click()
    wait(browser, 60).until(lambda d: re.search(r"/explorations/[\d,]+", d.current_url)
                            or find(d, "#submit-error").text)
    match = re.search(r"/explorations/([\d,]+)", browser.current_url)
    assert match, find(browser, "#submit-error").text
    ids = [int(i) for i in match.group(1).split(",")]
    for i in ids:  # accepted is the point: nothing needs to run
        form_daemon.post(f"/v1/explorations/{i}/cancel")
    assert len(ids) == len(shapes)
    for i in ids:
        status, x = form_daemon.get(f"/v1/explorations/{i}")
        assert status == 200 and x["kernel"] == t["kernel"]


def test_a_name_the_server_refuses_is_shown_at_the_field(browser, form_daemon):
    browser.allowed_errors.append("/v1/(expand|explorations) - Failed to load resource")
    browser.get(f"{form_daemon.base}/new?from=geglu")
    wait(browser).until(lambda d: find(d, "#distinct").text)
    set_text(browser, find(browser, "#kernel"), "../../tmp/evil $(id)")
    wait(browser).until(lambda d: "is a name of letters" in find(d, "#kernel-error").text)
    browser.shot("kernel-refused")
    find(browser, "#submit").click()
    wait(browser).until(lambda d: find(d, "#submit-error").text)
    assert browser.switch_to.active_element.get_attribute("id") == "kernel"
    assert browser.current_url.endswith("/new?from=geglu")
    # A name may start with a digit, as 2mm's does.
    set_text(browser, find(browser, "#kernel"), "2geglu")
    wait(browser).until(lambda d: find(d, "#distinct").text and not find(d, "#kernel-error").text)
