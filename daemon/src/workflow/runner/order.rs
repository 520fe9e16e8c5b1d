//! The canonical order of a run's transcript: the entries of `for_each`
//! items and `parallel` branches that run at the same time are written in
//! the items' and branches' order, not in the order they happen, so the
//! same run writes the same transcript whatever finishes first.
//!
//! Each concurrent step is a group; the earliest item not finished is
//! *live* and writes through at once (to the group's own place in its
//! enclosing group, and so on up to the transcript). A later item's
//! entries wait in memory until every item before it has finished. A
//! crash loses at most what such a waiting item wrote; the ledger keeps
//! its results regardless.

use std::collections::{BTreeMap, BTreeSet};

use super::{Failure, Runner};
use crate::session::transcript::Body;

/// One concurrent step's items as they write.
#[derive(Default)]
pub(super) struct Group {
    /// The items' names in order: a parallel step's branch ids (a
    /// for_each's items are numbered).
    branches: Vec<String>,
    /// The live item.
    next: usize,
    finished: BTreeSet<usize>,
    waiting: BTreeMap<usize, Vec<Body>>,
}

impl Runner {
    /// Opens the group of the concurrent step at `path`.
    pub(super) fn open_group(&self, path: &str, branches: Vec<String>) {
        self.groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                path.to_string(),
                Group {
                    branches,
                    ..Group::default()
                },
            );
    }

    /// Item `index` of the group at `path` finished: the items after it
    /// that wait write, in order, up to the next one still running.
    pub(super) async fn item_done(&self, path: &str, index: usize) -> Result<(), Failure> {
        let ready = {
            let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
            let Some(g) = groups.get_mut(path) else {
                return Ok(());
            };
            g.finished.insert(index);
            let mut ready = Vec::new();
            while g.finished.contains(&g.next) {
                ready.extend(g.waiting.remove(&g.next).unwrap_or_default());
                g.next += 1;
            }
            ready.extend(g.waiting.remove(&g.next).unwrap_or_default());
            ready
        };
        for body in ready {
            self.write(path, body).await?;
        }
        self.turns.notify_waiters();
        Ok(())
    }

    /// Waits until the step at `path` is the live item of every group it
    /// is in, so what it writes goes straight to the transcript.
    pub(super) async fn wait_turn(&self, path: &str) {
        loop {
            let told = self.turns.notified();
            tokio::pin!(told);
            // Registered before looking, so a finish in between is seen.
            told.as_mut().enable();
            if self.is_live(path) {
                return;
            }
            told.await;
        }
    }

    fn is_live(&self, path: &str) -> bool {
        let groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        let mut at = path.to_string();
        while let Some((group, item)) = group_of(&at) {
            if let Some(g) = groups.get(&group)
                && g.index(&item) != g.next
            {
                return false;
            }
            at = group;
        }
        true
    }

    /// Closes the group at `path`: what its items still hold (a wait-any
    /// step's losers) is written in their order.
    pub(super) async fn close_group(&self, path: &str) -> Result<(), Failure> {
        let left = self
            .groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(path);
        self.turns.notify_waiters();
        for body in left
            .into_iter()
            .flat_map(|g| g.waiting.into_values().flatten())
        {
            self.write(path, body).await?;
        }
        Ok(())
    }

    /// Writes `body`, an entry of the step at `path`, to the run's
    /// transcript in canonical order.
    pub(super) async fn write(&self, path: &str, body: Body) -> Result<(), Failure> {
        let mut at = path.to_string();
        loop {
            let Some((group, item)) = group_of(&at) else {
                return self
                    .log
                    .lock()
                    .await
                    .append(&self.run.id, body)
                    .map_err(|e| Failure(e.to_string()));
            };
            {
                let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(g) = groups.get_mut(&group) {
                    let index = g.index(&item);
                    if index != g.next {
                        g.waiting.entry(index).or_default().push(body);
                        return Ok(());
                    }
                }
            }
            at = group;
        }
    }
}

impl Group {
    fn index(&self, item: &Item) -> usize {
        match item {
            Item::Index(i) => *i,
            Item::Branch(id) => self.branches.iter().position(|b| b == id).unwrap_or(0),
        }
    }
}

/// Which item of which group a path is.
enum Item {
    Index(usize),
    Branch(String),
}

/// The innermost concurrent step `path` is an item of: `each[2]` is item
/// 2 of `each`, `both.a` branch `a` of `both`, `sub/each[1].a` branch `a`
/// of `sub/each[1]`; `None` for a step of a line.
fn group_of(path: &str) -> Option<(String, Item)> {
    let tail_start = path.rfind('/').map_or(0, |i| i + 1);
    let tail = &path[tail_start..];
    if let Some(open) = tail.strip_suffix(']').and_then(|t| t.rfind('[')) {
        let index = tail[open + 1..tail.len() - 1].parse().ok()?;
        return Some((path[..tail_start + open].to_string(), Item::Index(index)));
    }
    let dot = tail.rfind('.')?;
    Some((
        path[..tail_start + dot].to_string(),
        Item::Branch(tail[dot + 1..].to_string()),
    ))
}

#[cfg(test)]
mod tests {
    use super::{Item, group_of};
    use serde_json::{Value, json};

    fn shown(path: &str) -> Option<(String, Value)> {
        group_of(path).map(|(g, item)| match item {
            Item::Index(i) => (g, Value::from(i)),
            Item::Branch(b) => (g, Value::from(b)),
        })
    }

    #[test]
    fn a_path_names_its_innermost_concurrent_step() {
        assert_eq!(shown("notes"), None);
        assert_eq!(shown("sub/notes"), None);
        assert_eq!(shown("each[2]"), Some(("each".into(), json!(2))));
        assert_eq!(shown("both.a"), Some(("both".into(), json!("a"))));
        assert_eq!(shown("each[1].a"), Some(("each[1]".into(), json!("a"))));
        assert_eq!(shown("both.a[3]"), Some(("both.a".into(), json!(3))));
        assert_eq!(shown("sub/each[10]"), Some(("sub/each".into(), json!(10))));
    }
}
