package dashboard

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"

	"github.com/keylock/keylock/core"
)

//go:embed assets
var assets embed.FS

// pageTemplate is the HTML shell of both pages; assets/app.js fills it in
// from the JSON API.
var pageTemplate = template.Must(template.ParseFS(assets, "assets/page.html"))

// Handler serves the dashboard: its two pages, their script and style,
// and the JSON API they poll. It is safe for concurrent use.
type Handler struct {
	locks *core.Client
	cfg   config
	mux   *http.ServeMux
	csrf  *http.CrossOriginProtection
}

var _ http.Handler = (*Handler)(nil)

// New returns the dashboard of the locks of locks. The paths it serves are
// relative to where it is mounted (mount it under a prefix with
// http.StripPrefix, as the package example does). It fails only on an
// invalid option.
func New(locks *core.Client, opts ...Option) (*Handler, error) {
	if locks == nil {
		return nil, fmt.Errorf("dashboard: nil *core.Client")
	}
	cfg := defaults()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	h := &Handler{locks: locks, cfg: cfg, mux: http.NewServeMux(), csrf: http.NewCrossOriginProtection()}
	h.mux.HandleFunc("GET /{$}", h.page("list"))
	h.mux.HandleFunc("GET /lock", h.page("lock"))
	h.mux.HandleFunc("GET /api/locks", h.listLocks)
	h.mux.HandleFunc("GET /api/lock", h.showLock)
	h.mux.HandleFunc("GET /api/deadlocks", h.listDeadlocks)
	h.mux.HandleFunc("POST /api/force-unlock", h.forceUnlock)
	h.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	return h, nil
}

// ServeHTTP serves one request of the dashboard.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	// Everything the pages use comes from this handler: no inline script,
	// nothing from the network, never framed (the force-unlock button must
	// not be clickjacked).
	hdr.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	h.mux.ServeHTTP(w, r)
}

// pageData is what page.html is rendered with; app.js reads it from the
// body's data attributes.
type pageData struct {
	Title       string
	Page        string // "list" or "lock"
	Name        string // the lock page's lock
	RefreshMs   int64
	LongHoldMs  int64
	PageSize    int
	ForceUnlock bool
}

func (h *Handler) page(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d := pageData{
			Title: h.cfg.title, Page: kind, RefreshMs: h.cfg.refresh.Milliseconds(),
			LongHoldMs: h.cfg.longHold.Milliseconds(), PageSize: h.cfg.pageSize,
		}
		if kind == "lock" {
			d.Name = r.URL.Query().Get("name")
			d.ForceUnlock = h.mayForceUnlock(r)
		}
		var b bytes.Buffer
		if err := pageTemplate.Execute(&b, d); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(b.Bytes())
	}
}

// mayForceUnlock reports whether force-unlock is on and r's user may use it.
func (h *Handler) mayForceUnlock(r *http.Request) bool {
	return h.cfg.forceUnlock && h.cfg.authorize(r)
}
