//! Entry point for the coverage-guided fuzzer (`fuzz/`; see
//! `pincer_channel::fuzz`): a Bot API update as Telegram's server or a
//! webhook's caller sends it. Not used by pincerd.

use serde_json::Value;

use crate::me::Me;

/// One update's bytes, read as the poller and the webhook read them:
/// anything that is JSON becomes an event (what cannot be read an
/// `Event::Other`), without a panic.
pub fn update(data: &[u8]) {
    let Ok(update) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let me = Me {
        id: 4242,
        username: "pincer_bot".into(),
        can_read_all_group_messages: false,
    };
    crate::updates::update_id(&update);
    crate::updates::event(&update, &me, "bot");
}
