package console

import (
	"net/http"

	"github.com/kagzi/kagzi/pkg/console/internal/eventsview"
)

// eventRoutes adds the page of event triggers and published events, and
// its JSON API, to m (package eventsview reads and shapes them).
func (c *Console) eventRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /triggers", c.page("triggers", func(r *http.Request, ns string) (any, error) {
		return eventsview.PageData(r.Context(), c.st, ns, r.URL.Query())
	}))
	m.HandleFunc("GET /api/v1/triggers", c.api(func(r *http.Request, ns string) (any, error) {
		return eventsview.ListTriggers(r.Context(), c.st, ns)
	}))
	m.HandleFunc("GET /api/v1/events", c.api(func(r *http.Request, ns string) (any, error) {
		return eventsview.ListEvents(r.Context(), c.st, ns, r.URL.Query(), 0)
	}))
}
