package xdsctl

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xdsd/xdsd/internal/app/daemon"
	"github.com/xdsd/xdsd/resource"
)

// adminTimeout bounds a request to the admin endpoint.
const adminTimeout = 10 * time.Second

// adminURL turns --admin (host:port or a URL) and a path into a URL.
func adminURL(admin, path string, query url.Values) (string, error) {
	if admin == "" {
		return "", fmt.Errorf("--admin is empty")
	}
	if !strings.Contains(admin, "://") {
		admin = "http://" + admin
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", fmt.Errorf("--admin %q: %w", admin, err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = query.Encode()
	return u.String(), nil
}

// adminFlags are the flags of the commands that read xdsd's admin
// endpoints.
type adminFlags struct {
	addr      string
	tokenFile string
}

func (a *adminFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.addr, "admin", defaultAdmin, "xdsd's admin address (host:port or http://host:port)")
	fs.StringVar(&a.tokenFile, "admin-token-file", "", "file holding the bearer token xdsd's admin endpoints require (xdsd serve --admin-token-file)")
}

// get fetches an admin endpoint and decodes its JSON into v.
func (a *adminFlags) get(ctx context.Context, path string, query url.Values, v any) error {
	u, err := adminURL(a.addr, path, query)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if a.tokenFile != "" {
		b, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return fmt.Errorf("--admin-token-file: %w", err)
		}
		token := strings.TrimSpace(string(b))
		if token == "" {
			return fmt.Errorf("--admin-token-file %s: empty", a.tokenFile)
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w (is xdsd running with its admin endpoint on %s? see --admin)", err, a.addr)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode == http.StatusUnauthorized {
		hint := "give --admin-token-file with the token of xdsd serve --admin-token-file"
		if a.tokenFile != "" {
			hint = "the token of --admin-token-file " + a.tokenFile + " is not xdsd's"
		}
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, hint)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: not the JSON xdsctl expects (is %s xdsd's admin endpoint?): %w", u, a.addr, err)
	}
	return nil
}

const defaultAdmin = "127.0.0.1:19000"

const statusHelp = `Usage: xdsctl status [--admin ADDR] [--admin-token-file FILE]

Shows, for every xDS stream connected to xdsd, how each resource type
stands, in the manner of 'istioctl proxy-status':

  SYNCED    the latest response sent was ACKed
  NACKED    the latest response sent was rejected (the message follows the table)
  STALE     a response was sent and is not yet ACKed
  NOT SENT  the stream subscribes to the type but was sent nothing yet
  -         the stream does not subscribe to the type

STREAM is the stream's id and variant: "ads/sotw", "ads/delta", or a type's
own service such as "cds/sotw". IDENTITY, shown when a client gave a
certificate, is its first URI SAN, else DNS SAN, else common name. Below the
table come the NACK messages, each stream's last error, the authorization
policy's reads (xdsd serve --authz-file), and the configuration directory's
last load error, if any. It reads xdsd's /status admin endpoint (xdsd serve --admin-addr).

Examples:
  xdsctl status                          # xdsd's default admin address, 127.0.0.1:19000
  xdsctl status --admin xdsd-0.internal:19000 --admin-token-file admin-token
`

// Status is `xdsctl status`: a table of every stream and type from xdsd's
// /status.
func Status(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", statusHelp, stderr)
	var admin adminFlags
	admin.register(fs.FlagSet)
	if done, code := parseNoArgs(fs, args, stdout, stderr); done {
		return code
	}
	var rep daemon.StatusReport
	if err := admin.get(ctx, "/status", nil, &rep); err != nil {
		fmt.Fprintln(stderr, "xdsctl status:", err)
		return exitFail
	}
	if err := printStatus(stdout, &rep); err != nil {
		fmt.Fprintln(stderr, "xdsctl status:", err)
		return exitFail
	}
	return exitOK
}

// printStatus writes the table and the messages below it.
func printStatus(w io.Writer, rep *daemon.StatusReport) error {
	// Columns: the types any stream has, in ADS order, then others.
	present := map[string]bool{}
	for _, s := range rep.Streams {
		for _, t := range s.Types {
			present[t.Type] = true
		}
	}
	var cols []string
	for _, t := range resource.Types() {
		if present[t.Short] {
			cols = append(cols, t.Short)
			delete(present, t.Short)
		}
	}
	var others []string
	for t := range present {
		others = append(others, t)
	}
	slices.Sort(others)
	cols = append(cols, others...)

	streams := slices.Clone(rep.Streams)
	slices.SortStableFunc(streams, func(a, b daemon.StreamEntry) int {
		if c := strings.Compare(a.NodeID, b.NodeID); c != 0 {
			return c
		}
		return int(a.ID) - int(b.ID)
	})

	identities := slices.ContainsFunc(streams, func(s daemon.StreamEntry) bool { return s.Identity != "" })
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	header := []string{"NODE", "STREAM"}
	if identities {
		header = append(header, "IDENTITY")
	}
	for _, c := range cols {
		header = append(header, strings.ToUpper(c))
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, s := range streams {
		row := []string{nodeLabel(s), fmt.Sprintf("%d %s", s.ID, s.Variant)}
		if identities {
			row = append(row, cmp.Or(s.Identity, "-"))
		}
		for _, c := range cols {
			state := "-"
			for _, t := range s.Types {
				if t.Type == c {
					state = t.State
				}
			}
			row = append(row, state)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(streams) == 0 {
		fmt.Fprintln(w, "(no streams connected)")
	}

	var nacks []string
	for _, s := range streams {
		for _, t := range s.Types {
			if t.NackMessage == "" {
				continue
			}
			when := ""
			if t.NackedAt != nil {
				when = " at " + t.NackedAt.Format(time.RFC3339)
			}
			earlier := ""
			if t.State != "NACKED" {
				earlier = " (since superseded)"
			}
			nacks = append(nacks, fmt.Sprintf("  %s stream %d %s: version %q NACKED%s%s: %s",
				nodeLabel(s), s.ID, t.Type, t.NackVersion, when, earlier, t.NackMessage))
		}
	}
	if len(nacks) > 0 {
		fmt.Fprintln(w, "\nNACKs:")
		for _, n := range nacks {
			fmt.Fprintln(w, n)
		}
	}
	var serrs []string
	for _, s := range streams {
		if s.LastError != "" {
			serrs = append(serrs, fmt.Sprintf("  %s stream %d: %s", nodeLabel(s), s.ID, s.LastError))
		}
	}
	if len(serrs) > 0 {
		fmt.Fprintln(w, "\nStream errors:")
		for _, e := range serrs {
			fmt.Fprintln(w, e)
		}
	}
	if !rep.Ready {
		fmt.Fprintln(w, "\nConfiguration: none loaded yet (xdsd is not ready)")
	} else if at := rep.Config.LastLoadedAt; at != nil {
		fmt.Fprintf(w, "\nConfiguration loaded at %s (%d loads, %d rejected)\n",
			at.Format(time.RFC3339), rep.Config.ReloadsOK, rep.Config.ReloadsFailed)
	}
	if st := rep.Store; st != nil {
		reach := "reachable"
		if !st.Reachable {
			reach = "UNREACHABLE"
			if st.Since != nil {
				reach += " since " + st.Since.Format(time.RFC3339)
			}
			if st.Error != "" {
				reach += ": " + st.Error
			}
		}
		fmt.Fprintf(w, "Replica %s: etcd prefix %s, revision %d (generation %s), etcd %s\n",
			st.Replica, st.Prefix, st.Revision, st.Generation, reach)
	}
	if a := rep.Authz; a != nil {
		fmt.Fprintf(w, "Authorization policy %s: %d rules, read at %s (%d rereads, %d refused)\n",
			a.File, a.Rules, a.LoadedAt.Format(time.RFC3339), a.ReloadsOK, a.ReloadsFailed)
		if a.LastError != "" {
			fmt.Fprintf(w, "  its latest version is refused; the policy read before stays:\n  %s\n", a.LastError)
		}
	}
	if rep.Config.LastError != "" {
		when := ""
		if rep.Config.LastErrorAt != nil {
			when = " at " + rep.Config.LastErrorAt.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "\nConfiguration rejected%s; still serving the last good one:\n  %s\n", when, rep.Config.LastError)
	}
	return nil
}

// nodeLabel names a stream's node: its id, with the cluster if any.
func nodeLabel(s daemon.StreamEntry) string {
	id := s.NodeID
	if id == "" {
		id = "(no id)"
	}
	if s.Cluster != "" {
		id += " (" + s.Cluster + ")"
	}
	return id
}

const dumpHelp = `Usage: xdsctl dump --node ID [--admin ADDR] [--admin-token-file FILE] [--output yaml|json]

Prints every resource xdsd serves to the node ID, by type, from xdsd's
/config_dump admin endpoint: the configuration as the node's group sees it
(node selectors applied). If a stream of that node is connected, its whole
node (cluster, metadata) is used to pick the group; otherwise a node with
just that id. Secret material is "[redacted]" unless xdsd serves with
--admin-show-secrets.

Examples:
  xdsctl dump --node envoy-1
  xdsctl dump --node envoy-1 --output json | jq '.resources.cds[].name'
  xdsctl dump --admin xdsd-0.internal:19000 --admin-token-file admin-token --node edge-1
`

// Dump is `xdsctl dump`: what xdsd serves one node.
func Dump(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dump", dumpHelp, stderr)
	var admin adminFlags
	admin.register(fs.FlagSet)
	node := fs.String("node", "", "node id whose configuration to print (required)")
	output := fs.String("output", formatYAML, "output format: yaml or json")
	if done, code := parseNoArgs(fs, args, stdout, stderr); done {
		return code
	}
	if err := checkFormat(*output); err != nil {
		fmt.Fprintln(stderr, "xdsctl dump:", err)
		return exitUsage
	}
	if *node == "" {
		fmt.Fprintln(stderr, "xdsctl dump: --node is required (the node id as the proxy sends it)")
		return exitUsage
	}
	var raw json.RawMessage
	if err := admin.get(ctx, "/config_dump", url.Values{"node": {*node}}, &raw); err != nil {
		fmt.Fprintln(stderr, "xdsctl dump:", err)
		return exitFail
	}
	var out []byte
	var err error
	if *output == formatJSON {
		var m any
		if err = json.Unmarshal(raw, &m); err == nil {
			out, err = json.MarshalIndent(m, "", "  ")
			out = append(out, '\n')
		}
	} else {
		n, e := jsonToYAMLNode(raw)
		if err = e; err == nil {
			out, err = encodeYAML(n)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "xdsctl dump:", err)
		return exitFail
	}
	if _, err := stdout.Write(out); err != nil {
		fmt.Fprintln(stderr, "xdsctl dump:", err)
		return exitFail
	}
	return exitOK
}
