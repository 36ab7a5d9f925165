package arch

import (
	"slices"
	"strings"
)

// NestedModules are the repository's modules besides the root, by
// directory, each holding what only a tool or a test needs
// (tests/testnats/natsbin pins the nats-server the root's tests build
// and run as a process).
var NestedModules = []string{"cmd/kagzi", "deploy", "tests/testnats/natsbin", "pkg/console/browsertest"}

// ToolModules are the modules only tools and tests need: the CLI's
// (cobra), the bench's comparison (River), the embedded NATS server,
// tern, the deploy tests' (compose-go, the Kubernetes API, yaml) and the
// browser tests' (chromedp). An application of the public packages sees
// every requirement of the root go.mod, those only the root's tests need
// included, so no file of the root module, test or not, imports them:
// this package's test checks the imports, tests/e2e's
// TestExternalModule an application's module graph.
var ToolModules = []string{
	"github.com/spf13/cobra",
	"github.com/riverqueue/river",
	"github.com/nats-io/nats-server/v2",
	"github.com/jackc/tern/v2",
	"github.com/compose-spec/compose-go/v2",
	"k8s.io/api",
	"k8s.io/apimachinery",
	"sigs.k8s.io/yaml",
	"github.com/chromedp/chromedp",
	"github.com/chromedp/cdproto",
}

// IsToolModule reports whether path, a module or package path, is one of
// ToolModules or inside one.
func IsToolModule(path string) bool {
	return slices.ContainsFunc(ToolModules, func(m string) bool { return path == m || strings.HasPrefix(path, m+"/") })
}
