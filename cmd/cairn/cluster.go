package main

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
	"github.com/cairnflow/cairn/engine/api"
)

func clusterCommand(g *globals) *cobra.Command {
	var serversOnly bool
	describe := &cobra.Command{
		Use:   "describe",
		Short: "Show the servers sharing the store, their heartbeats, and who serves which shard",
		Long: `Shows the servers that share the Postgres store (each one's address, last
heartbeat and the shards it serves), every shard's owner, lease epoch and
expiry (by the database's clock), and the answering server's counters:
shards taken, given up and lost, commits refused by a fence, calls
refused because a lease could not be renewed in time, calls forwarded,
tasks given back. A server on the embedded store describes itself
alone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			req := &api.DescribeClusterRequest{}
			if serversOnly {
				req.View = api.ViewServers
			}
			d, err := c.Service().DescribeCluster(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.emit(d, func(w io.Writer) { printCluster(w, d) })
		},
	}
	describe.Flags().BoolVar(&serversOnly, "servers", false, "the servers only, not every shard")
	return clientFlags(group("cluster", "Inspect the servers sharing the store", describe), g)
}

func printCluster(w io.Writer, d *api.DescribeClusterResponse) {
	if !d.Clustered {
		fmt.Fprintln(w, "One server on the embedded store: no cluster (cairn server --store postgres://… to share a database).")
		return
	}
	fmt.Fprintf(w, "Cluster of %d servers, %d shards (answered by %s; database clock %s)\n\n", len(d.Servers), d.Shards, d.Self,
		d.Now.UTC().Format(time.RFC3339))
	rows := [][]string{}
	for _, s := range d.Servers {
		state := "alive"
		if !s.Alive {
			state = "gone"
		}
		rows = append(rows, []string{s.ID, s.Address, state, fmt.Sprint(s.Shards), ago(d.Now, s.LastHeartbeat), s.Version})
	}
	table(w, []string{"SERVER", "ADDRESS", "STATE", "SHARDS", "LAST HEARTBEAT", "VERSION"}, rows)
	if len(d.ShardOwners) > 0 {
		fmt.Fprintln(w)
		printShards(w, d)
	}
	s := d.Stats
	fmt.Fprintf(w, "\nThis server: %d shards taken, %d given up, %d lost to a takeover, %d commits fenced, %d calls refused past a lease, %d calls forwarded, %d tasks given back\n",
		s.Acquired, s.Released, s.Lost, s.FencedCommits, s.RefusedPastLease, s.Forwarded, s.HandedBack)
}

// printShards lists the shards by owner, as ranges, and the unowned ones.
func printShards(w io.Writer, d *api.DescribeClusterResponse) {
	byOwner := map[string][]int{}
	for _, o := range d.ShardOwners {
		owner := o.Owner
		if !o.Held {
			owner = "(none: lease ran out)"
			if o.Owner == "" {
				owner = "(none yet)"
			}
		}
		byOwner[owner] = append(byOwner[owner], o.Shard)
	}
	owners := make([]string, 0, len(byOwner))
	for o := range byOwner {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	rows := [][]string{}
	for _, o := range owners {
		rows = append(rows, []string{o, fmt.Sprint(len(byOwner[o])), view.Ranges(byOwner[o])})
	}
	table(w, []string{"OWNER", "SHARDS", ""}, rows)
}

// ago is how long before now t was ("-" when never).
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Round(time.Millisecond).String() + " ago"
}
