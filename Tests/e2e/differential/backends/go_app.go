// Differential backend: Go's net/http form parsing (stdlib only). r.ParseMultipartForm / r.ParseForm,
// r.MultipartForm.Value and .File (maps: no order between names; values of one name keep body order),
// and the idiomatic single-value view r.FormValue / r.FormFile (the first value).
// Built at test time: go build -o DIR/go_app go_app.go. Usage: go_app PORT; appends the X-Request-Id of
// each parsed body to $UPSTREAM_LOG.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
)

type part struct {
	Name        string  `json:"name"`
	Filename    *string `json:"filename"`
	ContentType *string `json:"content_type"`
	Size        int     `json:"size"`
	Sha256      string  `json:"sha256"`
	Kind        string  `json:"kind"`
}

type value struct {
	Size     int     `json:"size"`
	Sha256   string  `json:"sha256"`
	Filename *string `json:"filename,omitempty"`
}

var logMu sync.Mutex

func digest(b []byte) (int, string) {
	h := sha256.Sum256(b)
	return len(b), hex.EncodeToString(h[:])
}

func sortedKeys[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func handler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		io.WriteString(w, "ok")
		return
	}
	parts := []part{}
	form := map[string]value{}
	var err error
	values := map[string][]string{}
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(strings.ToLower(ct), "multipart/") {
		err = r.ParseMultipartForm(32 << 20)
		if err == nil {
			values = r.MultipartForm.Value
		}
	} else {
		err = r.ParseForm()
		values = r.PostForm
	}
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	for _, k := range sortedKeys(values) {
		for _, v := range values[k] {
			size, sum := digest([]byte(v))
			parts = append(parts, part{Name: k, Size: size, Sha256: sum, Kind: "field"})
		}
		size, sum := digest([]byte(r.FormValue(k)))
		form[k] = value{Size: size, Sha256: sum}
	}
	if r.MultipartForm != nil {
		for _, k := range sortedKeys(r.MultipartForm.File) {
			for _, fh := range r.MultipartForm.File[k] {
				f, _ := fh.Open()
				data, _ := io.ReadAll(f)
				f.Close()
				size, sum := digest(data)
				name, ctype := fh.Filename, fh.Header.Get("Content-Type")
				parts = append(parts, part{Name: k, Filename: &name, ContentType: &ctype, Size: size, Sha256: sum,
					Kind: "file"})
			}
			if _, seen := form[k]; !seen {
				f, fh, ferr := r.FormFile(k)
				if ferr == nil {
					data, _ := io.ReadAll(f)
					f.Close()
					size, sum := digest(data)
					name := fh.Filename
					form[k] = value{Size: size, Sha256: sum, Filename: &name}
				}
			}
		}
	}
	if path := os.Getenv("UPSTREAM_LOG"); path != "" {
		logMu.Lock()
		if f, ferr := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644); ferr == nil {
			f.WriteString(r.Header.Get("X-Request-Id") + "\n")
			f.Close()
		}
		logMu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"parts": parts, "form": form, "order": "fields-then-files"})
}

func main() {
	http.HandleFunc("/", handler)
	if err := http.ListenAndServe("127.0.0.1:"+os.Args[1], nil); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
}
