package dashboard_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// noBrowserEnv, set to 1, skips the browser tests (and says so). Without
// it a missing Chromium fails them: `make test` installs it.
const noBrowserEnv = "KEYLOCK_NO_BROWSER"

// chromiumPath finds Chromium: $KEYLOCK_CHROMIUM, else chromium,
// chromium-browser, google-chrome on PATH.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if os.Getenv(noBrowserEnv) == "1" {
		t.Skip(noBrowserEnv + "=1: browser tests skipped")
	}
	if p := os.Getenv("KEYLOCK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("Chromium not found (chromium, chromium-browser or google-chrome on PATH, or $KEYLOCK_CHROMIUM): " +
		"make test installs it (apt-get install chromium); set " + noBrowserEnv + "=1 to skip the browser tests")
	return ""
}

// browser starts a headless Chromium with a fresh profile and returns a
// tab's context, bounded by within. Cleanup closes the browser and waits
// for it.
func browser(t *testing.T, within time.Duration) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("font-render-hinting", "none"),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium leaves a directory of its own in $TMPDIR
		// (org.chromium.Chromium.*): give it one the test removes.
		chromedp.Env("TMPDIR=" + t.TempDir()),
		chromedp.WindowSize(1440, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	tctx, cancel := context.WithTimeout(ctx, within)
	t.Cleanup(func() {
		cancel()
		cancelTab()
		cancelAlloc() // waits for the browser to exit
	})
	if err := chromedp.Do(tctx, chromedp.Navigate("about:blank")); err != nil { // start it now
		t.Fatalf("start Chromium: %v", err)
	}
	return tctx
}
