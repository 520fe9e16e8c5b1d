//! The tool policy end to end: `pincer tools list` explains every decision,
//! and the model is offered exactly the tools the list calls offered.

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::requests::offered_tools;
use pincer_testkit::scripted::{ScriptedLlm, Step};

#[tokio::test(flavor = "multi_thread")]
async fn tools_list_explains_each_removal_and_matches_what_the_model_sees() {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        "tools = { profile = \"coding\", deny = [\"exec\"] }\n\n[tools.by_provider.test]\ndeny = [\"grep\"]\n",
    ));
    llm.script("[policy]", vec![Step::text("ok")]);
    let _d = home.start();

    let out = home.cli(&["tools", "list"]).await;
    let text = out.ok();
    assert!(text.contains("profile `coding`"), "{text}");
    let line = |tool: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(tool))
            .unwrap_or_else(|| panic!("no line for {tool} in\n{text}"))
            .to_string()
    };
    assert!(line("read").ends_with("offered"), "{}", line("read"));
    assert!(
        line("exec").contains("removed by agent `main`: denied by `exec`"),
        "{}",
        line("exec")
    );
    assert!(
        line("grep").contains("removed by provider `test`: denied by `grep`"),
        "{}",
        line("grep")
    );

    let json = home.cli(&["--json", "tools", "list"]).await.json();
    let offered: Vec<&str> = json["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["offered"] == true)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        offered,
        [
            "read",
            "write",
            "edit",
            "ls",
            "glob",
            "apply_patch",
            "process",
            "web_fetch",
            "memory_search",
            "memory_get",
            "session_status",
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "sessions_spawn"
        ]
    );

    home.cli(&["send", "[policy] hi"]).await.ok();
    let sent = offered_tools(&llm.journal()[0]);
    assert_eq!(sent, offered, "the model is offered what the list says");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_channel_stranger_gets_messaging_and_no_runtime() {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&provider_config(
        "openai",
        &format!("{}/v1", llm.base_url()),
        "",
    ));
    let _d = home.start();
    let json = home
        .cli(&[
            "--json",
            "tools",
            "list",
            "--channel",
            "telegram",
            "--peer",
            "12345",
        ])
        .await
        .json();
    assert_eq!(json["profile"], "messaging");
    let tools = json["tools"].as_array().unwrap();
    let exec = tools.iter().find(|t| t["name"] == "exec").unwrap();
    assert_eq!(exec["offered"], false);
    assert_eq!(exec["removed_by"], "profile `messaging`");
    let offered: Vec<&str> = tools
        .iter()
        .filter(|t| t["offered"] == true)
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        offered,
        [
            "session_status",
            "sessions_list",
            "sessions_history",
            "sessions_send",
            "sessions_spawn",
            "message"
        ]
    );
    // The owner's memory is out of a stranger's reach, whatever the
    // profile offers, and the list says so beside the layers.
    let get = tools.iter().find(|t| t["name"] == "memory_get").unwrap();
    assert_eq!(get["removed_by"], "data boundary", "{get}");
    let boundary: Vec<&str> = json["boundary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(boundary[0], "acts for: telegram user 12345", "{boundary:?}");
    assert!(
        boundary
            .iter()
            .any(|l| l.starts_with("memory: the owner's")),
        "{boundary:?}"
    );
}

/// A `[[bindings]]` entry routes a channel's chat to its agent, with that
/// agent's tool layer; a peer no binding names goes to the default agent.
#[tokio::test(flavor = "multi_thread")]
async fn a_binding_routes_a_peer_to_its_agent() {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n[agents.helper]\nmodel = \"default\"\ntools = {{ deny = [\"sessions_spawn\"] }}\n\n[[bindings]]\nchannel = \"telegram\"\npeer = \"777\"\nagent = \"helper\"\n",
        provider_config("openai", &format!("{}/v1", llm.base_url()), "")
    ));
    let _d = home.start();
    let list = |peer: &'static str| {
        let home = &home;
        async move {
            home.cli(&[
                "--json",
                "tools",
                "list",
                "--channel",
                "telegram",
                "--peer",
                peer,
            ])
            .await
            .json()
        }
    };
    let bound = list("777").await;
    assert_eq!(bound["agent"], "helper", "{bound}");
    let spawn = bound["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "sessions_spawn")
        .unwrap();
    assert_eq!(spawn["offered"], false, "{spawn}");
    let other = list("778").await;
    assert_eq!(other["agent"], "main", "{other}");
}

/// A `[channels.telegram]` group entry routes the group to its agent with
/// the group's layer and a sender's own layer (`pincer tools list
/// --channel --group --peer`).
#[tokio::test(flavor = "multi_thread")]
async fn a_group_entry_routes_the_group_with_its_layers() {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    home.write_config(&format!(
        "{}\n[agents.helper]\nmodel = \"default\"\ntools = {{ profile = \"messaging\", allow = [\"web_fetch\"] }}\n\n\
         [channels.telegram]\n\
         [channels.telegram.groups.\"-100\"]\nagent = \"helper\"\ntools = {{ deny = [\"web_fetch\"] }}\n\
         [channels.telegram.groups.\"-100\".senders.\"7\"]\ntools = {{ deny = [\"memory_get\"] }}\n",
        provider_config("openai", &format!("{}/v1", llm.base_url()), "")
    ));
    let _d = home.start();
    let list = |args: &'static [&'static str]| {
        let home = &home;
        async move {
            let mut all = vec!["--json", "tools", "list", "--channel", "telegram"];
            all.extend_from_slice(args);
            home.cli(&all).await.json()
        }
    };
    let tool = |list: &serde_json::Value, name: &str| {
        list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {list}"))
            .clone()
    };

    let member = list(&["--group", "-100", "--peer", "5"]).await;
    assert_eq!(member["agent"], "helper", "{member}");
    let web = tool(&member, "web_fetch");
    assert_eq!(web["offered"], false, "{web}");
    assert_eq!(web["removed_by"], "channel/group", "{web}");
    assert_eq!(
        tool(&member, "memory_get")["removed_by"],
        "data boundary",
        "{member}"
    );
    assert_eq!(tool(&member, "sessions_list")["offered"], true, "{member}");

    let seven = list(&["--group", "-100", "--peer", "7"]).await;
    let get = tool(&seven, "memory_get");
    assert_eq!(get["offered"], false, "{get}");
    assert_eq!(get["removed_by"], "sender", "{get}");

    // The same person in a DM: the default agent, no group layers.
    let dm = list(&["--peer", "7"]).await;
    assert_eq!(dm["agent"], "main", "{dm}");
    assert_eq!(
        tool(&dm, "memory_get")["removed_by"],
        "data boundary",
        "{dm}"
    );
    assert_eq!(tool(&dm, "web_fetch")["offered"], false, "{dm}");
}
