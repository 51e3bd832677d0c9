"""`hallu serve EXPORT`: a real server on loopback answers `hallu annotate`'s rows for the same rows, refuses
each class of bad input with its status and a message while serving the next request, requires the bearer
token it was given (and never logs it), and finishes a request in flight when it is told to stop."""
import json
import os
import shutil
import signal
import threading
import time

import httpx
import pytest

from tests.served import Server
from tests.test_grounding import synthetic
from tests.test_grounding_export import _annotate, _eval, _write


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """A grounding annotator fitted on synthetic records and exported (`eval.export`), and its test rows."""
    tmp = tmp_path_factory.mktemp("serve")
    data = tmp / "data"
    for name, records in (("train", synthetic(120, 0)), ("val", synthetic(40, 1)), ("test", synthetic(24, 2))):
        _write(data / f"{name}.jsonl", records)
    _eval(f"data.root={data}", "data.folds=0", f"output_dir={tmp / 'run'}", f"eval.export={tmp / 'export'}")
    rows = [{"id": r["id"], "source": r["source"], "response": r["response"]} for r in synthetic(24, 2)]
    return tmp / "export", rows


@pytest.fixture(scope="module")
def server(export):
    s = Server(export[0], "--max-rows", "32", "--max-body-bytes", "200000")
    yield s
    s.stop()


def test_the_api_answers_the_commands_rows_for_the_same_rows(server, export, tmp_path):
    path, rows = export
    command = _annotate(path, rows, tmp_path / "out.jsonl")
    answered = server.post(rows)
    assert answered.status_code == 200, answered.text
    assert answered.json() == command
    one = server.post(rows[3])                                        # a single row: a single row back
    assert one.status_code == 200 and one.json() == command[3]
    unnamed = server.post([{k: v for k, v in r.items() if k != "id"} for r in rows[:2]]).json()
    assert [u["id"] for u in unnamed] == ["r0", "r1"] and unnamed[1]["spans"] == command[1]["spans"]
    lettuce = server.post({"context": [rows[1]["source"]], "question": "What does the museum hold?",
                           "answer": rows[1]["response"]}).json()      # LettuceDetect's request shape
    assert lettuce["spans"] == command[1]["spans"] and lettuce["label"] == command[1]["label"]
    assert any(c["label"] == "hallucinated" for c in command) and any(c["label"] == "faithful" for c in command)


def test_the_page_and_the_description_are_served(server):
    page = httpx.get(f"{server.url}/")
    assert page.status_code == 200 and 'id="annotate"' in page.text and "http" not in page.text.split("<script>")[1]
    described = httpx.get(f"{server.url}/v1/annotator").json()
    assert described["annotator"]["method"] == "grounding" and described["annotator"]["scorer"] == "spans"
    assert httpx.get(f"{server.url}/openapi.json").json()["paths"]["/v1/annotate"]["post"]


def test_concurrent_requests_are_batched_and_each_gets_its_own_rows(server, export):
    _, rows = export
    alone = {r["id"]: server.post(r).json() for r in rows[:6]}
    answers = [None] * 6

    def ask(i: int) -> None:
        answers[i] = server.post(rows[i]).json()

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [alone[r["id"]] for r in rows[:6]]


@pytest.mark.parametrize("body, status, said", [
    (b'{"source": "a", "response": ', 422, "malformed JSON"),
    (json.dumps({"source": "The museum opened."}).encode(), 422, "row 1, field 'response'"),
    (json.dumps([{"source": "a", "response": "b"}, {"response": "b"}]).encode(), 422, "row 2, field 'source'"),
    (json.dumps([]).encode(), 422, "non-empty list"),
    (json.dumps([{"source": "a", "response": "b"}] * 33).encode(), 413, "33 rows, over the limit of 32"),
    (json.dumps({"source": "x" * 250_000, "response": "b"}).encode(), 413, "over the limit of 200,000"),
])
def test_bad_input_gets_its_status_and_the_server_serves_the_next_request(server, export, body, status, said):
    answered = server.post(body)
    assert answered.status_code == status and said in answered.json()["detail"], answered.text
    assert server.post(export[1][0]).status_code == 200


def test_a_full_queue_answers_503_with_retry_after(export):
    s = Server(export[0], "--max-queued-rows", "2")
    try:
        full = s.post(export[1][:3])
        assert full.status_code == 503 and full.headers["retry-after"] == "1" and "--max-queued-rows" in full.text
        assert s.post(export[1][:2]).status_code == 200
    finally:
        s.stop()


def _queued_rows(s: Server, want: int, within_s: float) -> bool:
    deadline = time.time() + within_s
    with httpx.Client(base_url=s.url) as poll:
        while time.time() < deadline:
            if poll.get("/health").json()["queued_rows"] == want:
                return True
            time.sleep(0.05)
    return False


def test_a_client_that_leaves_mid_request_frees_its_rows_before_their_batch_runs(export):
    s = Server(export[0], "--batch-window-ms", "8000")           # a request waits 8 s for others to join
    try:
        started = time.time()
        leaving = threading.Thread(target=lambda: pytest.raises(httpx.ReadTimeout, s.post, export[1][:3], timeout=2.5))
        leaving.start()
        assert _queued_rows(s, 3, within_s=2.5)                      # its 3 rows wait for the model
        leaving.join()                                               # the client gave up after 2.5 s and hung up
        assert _queued_rows(s, 0, within_s=4.0)                      # freed at once, not when the window closes
        assert time.time() - started < 8.0
        assert s.post(export[1][:2], timeout=60).status_code == 200  # and the server serves the next request
    finally:
        s.stop()


def test_the_bearer_token_is_required_and_never_logged(export):
    key = "sk-serve-" + os.urandom(8).hex()
    s = Server(export[0], "--api-key-env", "SERVE_TEST_KEY", env={"SERVE_TEST_KEY": key})
    try:
        assert s.post(export[1][0]).status_code == 401
        assert s.post(export[1][0], headers={"authorization": "Bearer wrong"}).status_code == 401
        assert s.post(export[1][0], headers={"authorization": f"Bearer {key}"}).status_code == 200
        assert httpx.get(f"{s.url}/health").status_code == 200                # health needs no key
        described = httpx.get(f"{s.url}/v1/annotator", headers={"authorization": f"Bearer {key}"}).json()
        assert described["annotator"]["method"] == "grounding"
    finally:
        log = s.stop()
    assert key not in log and "401" in log


def test_sigterm_finishes_the_request_in_flight_then_exits(export):
    s = Server(export[0], "--batch-window-ms", "1500")           # the request waits 1.5 s for others to join
    answered = {}
    asking = threading.Thread(target=lambda: answered.update(r=s.post(export[1][:4])))
    asking.start()
    time.sleep(0.5)
    s.proc.send_signal(signal.SIGTERM)
    asking.join(timeout=60)
    assert answered["r"].status_code == 200 and len(answered["r"].json()) == 4
    assert s.proc.wait(timeout=60) == 0


def test_the_report_of_a_file_is_what_the_command_writes_beside_its_output(server, export, tmp_path):
    path, rows = export
    command = _annotate(path, rows, tmp_path / "rows.annotated.jsonl")
    report = httpx.post(f"{server.url}/v1/report", timeout=60,
                        json={"name": "rows.annotated.jsonl", "rows": rows, "outputs": command}).json()
    assert report["summary"] == (tmp_path / "rows.annotated.jsonl.summary.md").read_text()
    assert report["page"] == (tmp_path / "rows.annotated.jsonl.html").read_text()
    assert report["histogram"].startswith("data:image/png;base64,")
    mismatched = httpx.post(f"{server.url}/v1/report", json={"rows": rows, "outputs": command[:-1]})
    assert mismatched.status_code == 422 and "outputs for" in mismatched.json()["detail"]
    outside = [dict(command[0], spans=[{"start": 0, "end": len(rows[0]["response"]) + 5}])]
    refused = httpx.post(f"{server.url}/v1/report", json={"rows": rows[:1], "outputs": outside})
    assert refused.status_code == 422 and "row 1" in refused.json()["detail"]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Debian's Chromium, headless, driven by Selenium through Debian's chromedriver."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra has it)")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.skip("Debian's chromium and chromium-driver are not installed (the README's apt-get line installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,1400"):
        options.add_argument(arg)
    b = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver))
    yield b
    b.quit()


def _marks(browser, within: str) -> list[tuple[int, int, str]]:
    from selenium.webdriver.common.by import By

    return [(int(m.get_attribute("data-start")), int(m.get_attribute("data-end")), m.get_attribute("textContent"))
            for m in browser.find_elements(By.CSS_SELECTOR, f"{within} mark")]


def _spans(out: dict) -> list[tuple[int, int, str]]:
    return [(s["start"], s["end"], s["text"]) for s in sorted(out["spans"], key=lambda s: s["start"])]


def test_a_person_pastes_a_row_and_sees_the_apis_spans_highlighted(server, export, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    row = next(r for r in export[1] if server.post(r).json()["spans"])
    api = server.post({"source": row["source"], "response": row["response"]}).json()
    browser.get(f"{server.url}/")
    browser.find_element(By.ID, "source").send_keys(row["source"])
    browser.find_element(By.ID, "response").send_keys(row["response"])
    browser.find_element(By.ID, "annotate").click()
    WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, "#answer mark"))
    assert _marks(browser, "#answer") == _spans(api)
    assert browser.find_element(By.ID, "verdict").text.startswith(f"{api['label']}, score {api['score']:.3f}")
    hover = "probability" if "prob" in api["spans"][0] else "flagged"         # grounding spans carry no probability
    assert hover in browser.find_element(By.CSS_SELECTOR, "#answer mark").get_attribute("title")
    assert "grounding" in browser.find_element(By.ID, "about").text and not browser.find_element(By.ID, "error").text
    browser.save_screenshot(str(tmp_path / "serve_page.png"))
    assert (tmp_path / "serve_page.png").stat().st_size > 10_000


def test_a_person_uploads_a_file_and_downloads_the_commands_rows_and_summary(server, export, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    path, rows = export
    command = _annotate(path, rows, tmp_path / "rows.annotated.jsonl")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    browser.get(f"{server.url}/")
    browser.find_element(By.ID, "file").send_keys(str(tmp_path / "rows.jsonl"))
    browser.find_element(By.ID, "annotate-file").click()
    WebDriverWait(browser, 120).until(lambda b: b.find_element(By.ID, "downloads").is_displayed()
                                      or b.find_element(By.ID, "file-error").text)
    assert not browser.find_element(By.ID, "file-error").text
    fetch = ("const done = arguments[arguments.length - 1];"
             "fetch(document.getElementById(arguments[0]).href).then((r) => r.text()).then(done);")
    annotated = browser.execute_async_script(fetch, "dl-jsonl")
    assert [json.loads(line) for line in annotated.splitlines()] == command
    summary = (tmp_path / "rows.annotated.jsonl.summary.md").read_text()
    assert browser.execute_async_script(fetch, "dl-summary") == summary
    assert browser.find_element(By.ID, "dl-jsonl").get_attribute("download") == "rows.annotated.jsonl"
    assert browser.execute_script("return document.getElementById('histogram').naturalWidth") > 100
    (tmp_path / "bad.jsonl").write_text(json.dumps(rows[0]) + "\n{not json\n")
    browser.find_element(By.ID, "file").send_keys(str(tmp_path / "bad.jsonl"))
    browser.find_element(By.ID, "annotate-file").click()
    WebDriverWait(browser, 30).until(lambda b: b.find_element(By.ID, "file-error").text)
    assert "bad.jsonl, line 2: not a JSON row" in browser.find_element(By.ID, "file-error").text


def test_the_static_report_highlights_every_rows_spans_and_filters_the_flagged(export, browser, tmp_path):
    from selenium.webdriver.common.by import By

    path, rows = export
    command = _annotate(path, rows, tmp_path / "out.jsonl")
    browser.get((tmp_path / "out.jsonl.html").as_uri())
    shown = browser.find_elements(By.CSS_SELECTOR, ".row")
    assert len(shown) == len(command)
    for element, out in zip(shown, command):
        marks = [(int(m.get_attribute("data-start")), int(m.get_attribute("data-end")), m.get_attribute("textContent"))
                 for m in element.find_elements(By.CSS_SELECTOR, "mark")]
        assert marks == _spans(out)
    browser.find_element(By.ID, "only").click()
    flagged = sum(o["label"] == "hallucinated" or bool(o["spans"]) for o in command)
    assert 0 < flagged < len(command)
    assert sum(e.is_displayed() for e in browser.find_elements(By.CSS_SELECTOR, ".row")) == flagged
