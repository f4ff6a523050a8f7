package webview

import (
	"container/list"
	"sync"

	"github.com/actorsnap/actorsnap/snapshot"
)

// cache keeps what was read of the store: the views of the snapshots
// looked at most recently (a bounded LRU, since each holds a whole
// snapshot) and the summary of every snapshot the list has shown (small;
// pruned to the ids the store still lists). Stored snapshots never
// change, so nothing in it goes stale; only deletion removes them.
type cache struct {
	mu        sync.Mutex
	max       int
	views     map[snapshot.SnapshotID]*list.Element // of *view
	order     *list.List                            // front: most recent
	summaries map[snapshot.SnapshotID]summary
}

func newCache(max int) *cache {
	return &cache{max: max, views: map[snapshot.SnapshotID]*list.Element{}, order: list.New(), summaries: map[snapshot.SnapshotID]summary{}}
}

// view returns the view of id if it is kept.
func (c *cache) view(id snapshot.SnapshotID) (*view, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.views[id]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*view), true
}

// addView keeps v, dropping the least recently used beyond the bound,
// and returns the view kept for its id: v, or one another request put
// there first.
func (c *cache) addView(v *view) *view {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := v.g.ID
	if e, ok := c.views[id]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*view)
	}
	c.views[id] = c.order.PushFront(v)
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.views, last.Value.(*view).g.ID)
	}
	c.summaries[id] = v.sum
	return v
}

// summary returns the summary of id if one is kept.
func (c *cache) summary(id snapshot.SnapshotID) (summary, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.summaries[id]
	return s, ok
}

// addSummary keeps the summary of a snapshot the list showed.
func (c *cache) addSummary(s summary) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.summaries[snapshot.SnapshotID(s.ID)] = s
}

// prune forgets the summaries and views of ids no longer stored.
func (c *cache) prune(stored map[snapshot.SnapshotID]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.summaries {
		if !stored[id] {
			delete(c.summaries, id)
		}
	}
	for id, e := range c.views {
		if !stored[id] {
			c.order.Remove(e)
			delete(c.views, id)
		}
	}
}
