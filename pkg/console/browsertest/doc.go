// Package browsertest holds the web console's browser tests: chromium,
// driven through chromedp, against a console in front of the live engine,
// saving screenshots of every view. They are a module of their own so that
// applications of the public packages do not depend on chromedp; they use
// the console through its exported API and HTTP alone.
package browsertest
