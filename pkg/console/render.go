package console

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kagzi/kagzi/pkg/httpapi"
)

// pageView is what every page template gets.
type pageView struct {
	Name       string
	Title      string
	NS         string
	Namespaces []string
	Prefix     string
	CSRF       string
	ReadOnly   bool
	User       string
	Data       any
	Err        string
	Query      url.Values
}

var titles = map[string]string{"runs": "Runs", "run": "Run", "deadletters": "Dead letters", "schedules": "Schedules",
	"workers": "Workers", "queues": "Queues and limits", "start": "Start a run",
	"batches": "Batches", "batch": "Batch", "triggers": "Triggers and events"}

func (c *Console) page(name string, fn dataFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := pageView{Name: name, Title: titles[name], Prefix: c.opts.Prefix, ReadOnly: c.opts.ReadOnly, Query: r.URL.Query()}
		v.CSRF, _ = r.Context().Value(ctxCSRF).(string)
		v.User, _ = r.Context().Value(ctxUser).(string)
		status := http.StatusOK
		ns, err := c.namespace(r)
		if err == nil {
			v.NS = ns
			v.Data, err = fn(r.WithContext(context.WithValue(r.Context(), ctxPage, true)), ns)
		}
		if err != nil {
			status = httpapi.ErrorStatus(err)
			v.Err = err.Error()
		}
		v.Namespaces, _ = c.st.Namespaces(r.Context())
		if !contains(v.Namespaces, v.NS) && v.NS != "" {
			v.Namespaces = append(v.Namespaces, v.NS)
		}
		var buf bytes.Buffer
		if err := c.tmpl.ExecuteTemplate(&buf, "layout", v); err != nil {
			c.log.Error("render console page", "page", name, "err", err)
			http.Error(w, "render failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_, _ = w.Write(buf.Bytes())
	}
}

// treeView feeds the recursive child-tree template.
type treeView struct {
	V    pageView
	Kids []ChildView
}

// batchRunsView feeds the template of a batch's runs of one outcome:
// the runs shown, how many the batch has, and what to say of none.
type batchRunsView struct {
	V     pageView
	Runs  []BatchRunView
	Count int
	Empty string
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func (c *Console) funcs() template.FuncMap {
	return template.FuncMap{
		"ago": func(t any) string {
			var tt time.Time
			switch v := t.(type) {
			case time.Time:
				tt = v
			case *time.Time:
				if v == nil {
					return "—"
				}
				tt = *v
			default:
				return "—"
			}
			d := time.Since(tt)
			switch {
			case d < 0:
				return "in " + (-d).Round(time.Second).String()
			case d < time.Minute:
				return d.Round(time.Second).String() + " ago"
			case d < time.Hour:
				return d.Round(time.Minute).String() + " ago"
			default:
				return tt.UTC().Format("2006-01-02 15:04:05Z")
			}
		},
		"ts": func(t any) string {
			switch v := t.(type) {
			case time.Time:
				return v.UTC().Format(time.RFC3339)
			case *time.Time:
				if v != nil {
					return v.UTC().Format(time.RFC3339)
				}
			}
			return ""
		},
		// short abbreviates an id to its last 8 hex digits. Kagzi's ids are
		// UUID v7, whose first 12 digits are the creation time in
		// milliseconds: the first 8 are the same for every run created in
		// the same ~65 s, while the last ones are random. The leading
		// ellipsis says which end was cut; console.js's live rows do the
		// same.
		"short": func(s fmt.Stringer) string {
			id := s.String()
			if len(id) <= 8 {
				return id
			}
			return "…" + id[len(id)-8:]
		},
		"clip": func(n int, s string) string {
			if len([]rune(s)) > n {
				return string([]rune(s)[:n]) + "…"
			}
			return s
		},
		"trendChart": func(points string, top int64, class string) trendChart {
			return trendChart{Points: points, Max: top, Class: class, Width: trendWidth, Height: trendHeight + 4}
		},
		"lower": strings.ToLower,
		"dict2": func(v pageView, kids []ChildView) treeView { return treeView{V: v, Kids: kids} },
		"batchRuns": func(v pageView, runs []BatchRunView, count int, empty string) batchRunsView {
			return batchRunsView{V: v, Runs: runs, Count: count, Empty: empty}
		},
		"statuses": func() []string { return []string{"PENDING", "RUNNING", "SLEEPING", "COMPLETED", "FAILED", "CANCELLED"} },
		"pct":      func(f float64) string { return fmt.Sprintf("%.2f%%", f) },
		// link builds a console URL under the prefix with the namespace and
		// extra query pairs.
		"link": func(v pageView, path string, kv ...string) string {
			q := url.Values{}
			q.Set("ns", v.NS)
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] != "" {
					q.Set(kv[i], kv[i+1])
				}
			}
			return v.Prefix + path + "?" + q.Encode()
		},
		// pageLink keeps the current filters and sets one more pair.
		"pageLink": func(v pageView, key, val string) string {
			q := url.Values{}
			for k, vs := range v.Query {
				q[k] = vs
			}
			q.Set("ns", v.NS)
			if val == "" {
				q.Del(key)
			} else {
				q.Set(key, val)
			}
			q.Del("cursor")
			if key == "cursor" && val != "" {
				q.Set("cursor", val)
			}
			return v.Prefix + "/runs?" + q.Encode()
		},
	}
}

// trendChart is one chart of the queues page's "Last hour" (template
// "trend"): a polyline of TrendView's points, its scale's top and its CSS
// class.
type trendChart struct {
	Points        string
	Max           int64
	Class         string
	Width, Height int
}
