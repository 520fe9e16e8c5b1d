//! Plugins end to end: discovery from `PINCER_HOME/plugins/`, a refused id,
//! a skipped tool whose name is taken, an optional tool offered only once an
//! allow list names the plugin, and a plugin's hook.

use pincer_testkit::harness::{TestHome, provider_config};
use pincer_testkit::peers::peer;
use pincer_testkit::requests::{offered_tools, tool_results};
use pincer_testkit::scripted::{ScriptedLlm, Step};
use serde_json::{Value, json};

fn install_plugins(home: &TestHome) {
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/weather_plugin/server.py");
    let weather = home.path().join("plugins/weather");
    std::fs::create_dir_all(&weather).unwrap();
    std::fs::copy(&fixture, weather.join("server.py")).unwrap();
    std::fs::write(
        weather.join("pincer-plugin.toml"),
        format!(
            "id = \"weather\"\n[server]\ncommand = [{:?}, \"server.py\"]\n[tools.forecast]\noptional = true\n\n[[hooks]]\nevent = \"before_tool_call\"\ntools = [\"alerts\"]\ncommand = [\"sh\", \"-c\", \"cat >/dev/null; echo '{{\\\"decision\\\": \\\"block\\\", \\\"reason\\\": \\\"alerts are off\\\"}}'\"]\n",
            peer("python").display().to_string()
        ),
    )
    .unwrap();
    let bad = home.path().join("plugins/zz-exec");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(
        bad.join("pincer-plugin.toml"),
        "id = \"exec\"\n[server]\nurl = \"http://127.0.0.1:9/mcp\"\n",
    )
    .unwrap();
    let bad_hook = home.path().join("plugins/zz-hook");
    std::fs::create_dir_all(&bad_hook).unwrap();
    std::fs::write(
        bad_hook.join("pincer-plugin.toml"),
        "id = \"badhook\"\n[server]\nurl = \"http://127.0.0.1:9/mcp\"\n[[hooks]]\nevent = \"before_tool_call\"\ntools = [\"group:nope\"]\ncommand = [\"true\"]\n",
    )
    .unwrap();
}

fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name}: {list}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn plugin_tools_follow_the_rules_of_spec_8_1() {
    let llm = ScriptedLlm::start().await.expect("scripted llm");
    let home = TestHome::new();
    let base = format!("{}/v1", llm.base_url());
    home.write_config(&provider_config("openai", &base, ""));
    install_plugins(&home);
    llm.script("[before]", vec![Step::text("ok")]);
    llm.script(
        "[after]",
        vec![
            Step::tools(&[
                ("forecast", json!({"city": "Paris"})),
                ("alerts", json!({})),
            ]),
            Step::text("done"),
        ],
    );
    let _d = home.start();

    let list = home.cli(&["--json", "tools", "list"]).await.json();
    let forecast = tool(&list, "forecast");
    assert_eq!(forecast["source"], "plugin:weather");
    assert_eq!(forecast["optional"], true);
    assert_eq!(forecast["offered"], false);
    assert_eq!(forecast["removed_by"], "optional");
    assert_eq!(tool(&list, "alerts")["offered"], true);
    // The plugin's `read` lost to the core tool.
    assert_eq!(tool(&list, "read")["source"], "core");
    let skipped = list["skipped"].to_string();
    assert!(
        skipped.contains("read: its name is taken by the core tool `read`"),
        "{skipped}"
    );
    let doctor = home.cli(&["doctor"]).await;
    assert!(
        doctor.stdout.contains("`exec` is the name of a core tool"),
        "{}",
        doctor.stdout
    );
    // A plugin hook's patterns pass the same check as config hooks'.
    assert!(
        doctor.stdout.contains("zz-hook/pincer-plugin.toml")
            && doctor.stdout.contains("unknown tool group `group:nope`"),
        "{}",
        doctor.stdout
    );
    assert!(
        doctor.stdout.contains("`weather` loaded"),
        "{}",
        doctor.stdout
    );

    home.cli(&["send", "--session", "a", "[before] hi"])
        .await
        .ok();
    let first = offered_tools(&llm.journal()[0]);
    assert!(
        first.contains(&"alerts".to_string()) && !first.contains(&"forecast".to_string()),
        "{first:?}"
    );

    // Naming the plugin in an allow list offers its optional tool.
    home.write_config(&provider_config(
        "openai",
        &base,
        "tools = { profile = \"full\", allow = [\"weather\"] }",
    ));
    home.cli(&["config", "reload"]).await.ok();
    let list = home.cli(&["--json", "tools", "list"]).await.json();
    assert_eq!(tool(&list, "forecast")["offered"], true, "{list}");
    let out = home
        .cli(&["send", "--json", "--session", "b", "[after] weather?"])
        .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    let journal = llm.journal();
    let last = journal.last().unwrap();
    assert!(offered_tools(last).contains(&"forecast".to_string()));
    let results = tool_results(last);
    assert!(results[0].contains("sunny in Paris"), "{results:?}");
    assert!(
        results[1].contains("blocked by hook `weather:0`: alerts are off"),
        "{results:?}"
    );
}
