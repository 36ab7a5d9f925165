// Command healthcheck probes an HTTP health endpoint: it exits 0 when a GET
// of the URL answers 200 OK within the timeout, 1 otherwise. The runtime
// image (distroless) has no curl or wget, so compose health checks run this:
//
//	healthcheck                                 # http://127.0.0.1:8080/healthz
//	healthcheck http://127.0.0.1:8080/readyz
//
// It takes no configuration beyond its one optional argument.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// DefaultURL is the liveness endpoint of a Kagzi service on its default
// KAGZI_HTTP_ADDR (:8080).
const DefaultURL = "http://127.0.0.1:8080/healthz"

// timeout bounds the whole request.
const timeout = 3 * time.Second

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run probes the URL in args (or DefaultURL) and returns the exit code.
func run(args []string, stderr io.Writer) int {
	url := DefaultURL
	switch len(args) {
	case 0:
	case 1:
		url = args[0]
	default:
		fmt.Fprintln(stderr, "usage: healthcheck [URL]")
		return 2
	}
	if err := probe(url, timeout); err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 1
	}
	return 0
}

// probe GETs url and wants 200 OK.
func probe(url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
