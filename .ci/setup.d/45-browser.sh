# Headless Chromium and its WebDriver for the run viewer's browser tests.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq chromium chromium-driver >/dev/null
fi
export AUTO_SWE_REQUIRE_BROWSER=1
