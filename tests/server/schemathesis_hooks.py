"""Hooks of the schemathesis run of test_schemathesis.py (loaded by the schemathesis process
through SCHEMATHESIS_HOOKS): every exploration a generated request creates is cancelled as soon
as it is queued, so that the run exercises the API and measures next to nothing."""
import json
import urllib.error
import urllib.request

import schemathesis


@schemathesis.hook
def after_call(context, case, response):
    if case.method != "POST" or case.path not in ("/v1/explorations", "/explore"):
        return
    if response.status_code != 202:
        return
    base = response.request.url[:response.request.url.index(case.path)]
    for created in json.loads(response.content)["explorations"]:
        req = urllib.request.Request(
            f"{base}/v1/explorations/{created['id']}/cancel", data=b"{}", method="POST",
            headers={"Content-Type": "application/json",
                     "Authorization": response.request.headers.get("Authorization", "")})
        try:
            urllib.request.urlopen(req, timeout=30).close()
        except urllib.error.HTTPError as e:
            # Already finished (409 not_running): nothing left to stop.
            assert e.code == 409, f"cancelling exploration {created['id']}: {e.code}"
