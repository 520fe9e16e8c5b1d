//! In order per chat (step 2 of the bridge's module doc): claimed
//! messages wait in their chat's queue, and one worker per chat takes them
//! in arrival order, so a person's second message never overtakes the
//! first.

use std::sync::Arc;

use super::{Bridge, chat_of, lock};
use crate::message::Inbound;

impl Bridge {
    /// Queues a claimed message behind its chat's earlier ones.
    pub(super) fn enqueue(self: &Arc<Self>, msg: Inbound) {
        let chat = chat_of(&msg);
        let mut queues = lock(&self.queues);
        let queue = queues.entry(chat.clone()).or_default();
        queue.waiting.push_back(msg);
        if !queue.worker {
            queue.worker = true;
            let this = self.clone();
            self.tasks.spawn(async move { this.drain(chat).await });
        }
    }

    pub(super) async fn drain(self: Arc<Self>, chat: String) {
        loop {
            let next = {
                let mut queues = lock(&self.queues);
                let Some(queue) = queues.get_mut(&chat) else {
                    return;
                };
                match queue.waiting.pop_front() {
                    Some(msg) => msg,
                    None => {
                        queues.remove(&chat);
                        return;
                    }
                }
            };
            self.accept(next).await;
        }
    }
}
