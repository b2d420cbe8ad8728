extension PrometheusText {
    /// The upstream groups' series: per server (labels `group`, `server`) up, requests and failures; per group up.
    /// Every configured server has its series from the start, at 0 (or up 1) before any request; no groups (a
    /// snapshot without configuration), no families.
    public mutating func upstreamHealth(_ health: UpstreamHealth) {
        guard !health.groups.isEmpty else { return }
        let servers = health.groups.flatMap { group in
            group.servers.map { (labels: [("group", group.name), ("server", $0.server)], server: $0) }
        }
        family("formwall_upstream_server_up", "gauge",
               help: "1 while the upstream server is not marked down by passive health (max-fails, fail-timeout).")
        for s in servers { sample("formwall_upstream_server_up", labels: s.labels, s.server.up ? 1 : 0) }
        family("formwall_upstream_server_requests_total", "counter",
               help: "Requests sent to or tried on the upstream server.")
        for s in servers { sample("formwall_upstream_server_requests_total", labels: s.labels, s.server.requests) }
        family("formwall_upstream_server_failures_total", "counter",
               help: "Attempts on the upstream server that failed (passive health failures).")
        for s in servers { sample("formwall_upstream_server_failures_total", labels: s.labels, s.server.failures) }
        family("formwall_upstream_group_up", "gauge", help: "1 while at least one server of the upstream group is up.")
        for group in health.groups {
            sample("formwall_upstream_group_up", labels: [("group", group.name)], group.up ? 1 : 0)
        }
    }
}
