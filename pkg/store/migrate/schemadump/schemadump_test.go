package schemadump_test

import (
	"testing"

	"github.com/kagzi/kagzi/pkg/store/migrate/schemadump"
)

// Normalising leaves no trace of the dump's version, settings or
// restrict key.
func TestNormaliseStripsWhatVaries(t *testing.T) {
	dump := "--\n-- PostgreSQL database dump\n--\n\n\\restrict abc\n\n-- Dumped from database version 15.20\n-- Dumped by pg_dump version 15.20\n\n" +
		"SET statement_timeout = 0;\nSELECT pg_catalog.set_config('search_path', '', false);\n\n--\n-- Name: kagzi; Type: SCHEMA; Schema: -; Owner: -\n--\n\n" +
		"CREATE SCHEMA kagzi;\n\n\n\n--\n-- PostgreSQL database dump complete\n--\n\n\\unrestrict abc\n\n"
	want := "\n-- Name: kagzi; Type: SCHEMA; Schema: -; Owner: -\n\nCREATE SCHEMA kagzi;\n"
	if got := schemadump.Normalise(dump); got != want {
		t.Fatalf("normalised:\n%q\nwant\n%q", got, want)
	}
}
