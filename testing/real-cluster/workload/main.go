// The workload of scripts/real-cluster and its probes, one static binary (only the standard library):
//
//	workload serve              an HTTP server on :8080 answering its pod's name; on SIGTERM it goes on serving for
//	                            5 s, then stops: the time kube-proxy takes to drop an endpoint, as a service behind a
//	                            PodDisruptionBudget that means to lose no request does (a preStop delay)
//	workload probe URL OUT      requests URL every 50 ms until SIGTERM; appends one JSON line per request that failed
//	                            ({"at": RFC 3339 with ms, "error": ...}) and, every second, one line with the count of
//	                            requests so far ({"at", "requests", "errors"})
//	workload api-probe URL OUT  asks URL (an API server's /readyz, TLS not verified: it is only asked whether it
//	                            answers) once a second, or as soon as the last request ended when it took longer (2 s
//	                            at most); one JSON line per request ({"at": when it was sent, "ok": true} or "error"),
//	                            so the time without an answering API server is measured from the lines' times
//
// The probes write as they go, so a probe killed with the run still leaves what it saw.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: workload serve | probe URL OUT | api-probe URL OUT")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		serve()
	case "probe":
		probe(os.Args[2], os.Args[3], 50*time.Millisecond, false)
	case "api-probe":
		probe(os.Args[2], os.Args[3], time.Second, true)
	default:
		fmt.Fprintf(os.Stderr, "workload: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}

func serve() {
	name, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, name) })
	server := &http.Server{Addr: ":8080", Handler: mux}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		time.Sleep(5 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		server.Shutdown(ctx)
	}()
	if err := server.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

const stamp = "2006-01-02T15:04:05.000Z07:00"

func probe(url, out string, every time.Duration, api bool) {
	f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	client := &http.Client{
		Timeout: 2 * time.Second,
		// A new connection per request, as kube-proxy balances connections, not requests.
		Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	ticker := time.NewTicker(every)
	lastCount := time.Now()
	requests, errors := 0, 0
	line := func(v map[string]any) {
		if _, ok := v["at"]; !ok {
			v["at"] = time.Now().UTC().Format(stamp)
		}
		b, _ := json.Marshal(v)
		f.Write(append(b, '\n'))
	}
	for {
		select {
		case <-stop:
			line(map[string]any{"requests": requests, "errors": errors, "final": true})
			return
		case <-ticker.C:
		}
		requests++
		sent := time.Now().UTC().Format(stamp)
		resp, err := client.Get(url)
		failure := ""
		if err != nil {
			failure = err.Error()
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || (api && strings.TrimSpace(string(body)) != "ok") {
				failure = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
			}
		}
		if failure != "" {
			errors++
			line(map[string]any{"at": sent, "error": failure})
		} else if api {
			line(map[string]any{"at": sent, "ok": true})
		}
		if !api && time.Since(lastCount) >= time.Second {
			lastCount = time.Now()
			line(map[string]any{"requests": requests, "errors": errors})
		}
	}
}
