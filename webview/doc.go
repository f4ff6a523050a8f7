// Package webview serves a read-only web view of a snapshot store: a page
// that lists the store's snapshots, with charts of their duration and
// size over the store's history, and shows one snapshot's channel graph
// (deadlock cycles highlighted), its participants' decoded states, its
// channels' in-flight messages and its diff against the previous
// snapshot. The page polls the list, so it follows new snapshots as they
// land.
//
// New returns the http.Handler; `actorsnap serve` runs it. The page and
// the libraries it uses (cytoscape.js for the graph, uPlot for the
// charts, under assets/vendor with their licences) are embedded, so the
// page works offline. Behind the page is a JSON API, which tools may use
// as well:
//
//	GET /api/snapshots                      every entry: a summary, or why it is damaged
//	GET /api/snapshots/{id}                 one summary, its deadlocks and violations
//	GET /api/snapshots/{id}/participants    ?offset=&limit=&q=&where= (decoded states)
//	GET /api/snapshots/{id}/channels        ?offset=&limit=&q=&empty=1 (decoded messages)
//	GET /api/snapshots/{id}/graph           ?focus=ID (collapsed above WithGraphLimit)
//	GET /api/snapshots/{id}/diff            ?against=ID&offset=&limit= (default: the previous)
//
// {id} is a snapshot id or "latest". Errors are JSON, {"error": "..."},
// with "damaged": true when the snapshot's stored form is damaged.
//
// The handler never writes to the store: it answers GET and HEAD only
// (405 otherwise) and calls only the store's reading methods. Snapshots
// are immutable, so the ones viewed are kept loaded (a few, least
// recently used first out) and each one's summary is kept for the list,
// which therefore reads each snapshot once, not at every poll.
//
// Large snapshots stay quick: tables are paged on the server, states are
// decoded only for the page shown (or once, for a where filter), and a
// graph of more participants than the limit is collapsed to a node per
// kind, with the deadlocked participants and the neighbourhood of a
// searched participant shown on their own.
package webview
