//! pincer's service definitions and their installers (SPEC §12): the
//! systemd user unit and the launchd LaunchAgent, rendered from templates,
//! and the service managers that load them (systemd over D-Bus, launchctl).
