// Path-routing backend: Go's net/http ServeMux (r.URL.Path, every escape decoded; the mux redirects paths
// with `.`, `..` or `//` to their clean form). `/api` and everything below it is the "api" handler, every
// other path "other". Usage: go_router PORT.
package main

import (
	"encoding/json"
	"net/http"
	"os"
)

func handler(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"handler": name, "path": r.URL.Path})
	}
}

func main() {
	mux := http.NewServeMux()
	mux.Handle("/api", handler("api"))
	mux.Handle("/api/", handler("api"))
	mux.Handle("/", handler("other"))
	if err := http.ListenAndServe("127.0.0.1:"+os.Args[1], mux); err != nil {
		panic(err)
	}
}
