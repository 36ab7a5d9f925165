package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/kagzi/kagzi/pkg/httpapi"
	"github.com/kagzi/kagzi/pkg/store"
)

// The store's typed errors map to one status each, wrapped or not: the
// API and the console answer them alike.
func TestErrorStatus(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{store.ErrNotFound, http.StatusNotFound},
		{store.ErrConflict, http.StatusConflict},
		{store.ErrNoWorker, http.StatusConflict},
		{store.ErrPayloadTooLarge, http.StatusRequestEntityTooLarge},
		{store.ErrInvalidArgument, http.StatusBadRequest},
		{store.ErrQueryTimeout, http.StatusServiceUnavailable},
		{context.Canceled, 499},
		{errors.New("boom"), http.StatusInternalServerError},
	} {
		if got := httpapi.ErrorStatus(fmt.Errorf("list runs: %w", c.err)); got != c.want {
			t.Errorf("%v: status %d, want %d", c.err, got, c.want)
		}
	}
}
