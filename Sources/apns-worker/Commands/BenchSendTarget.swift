// The server `bench send` sends to: the --endpoint given, or an h2o it starts (and must not leave behind,
// also when the run is interrupted).

import Foundation
import Platform

/// Where the notifications go, and the h2o to stop afterwards if the bench started one.
struct BenchSendTarget {
    var endpoint: String
    var caFile: String?
    /// For the report's first line.
    var serverName: String
    private var server: H2OReferenceServer?
    private var interrupts: SignalWatcher?

    /// The --endpoint (with its --ca-file), or a new h2o in `directory`.
    static func start(_ settings: BenchSendSettings, _ arguments: ParsedArguments, directory: String)
        async throws -> BenchSendTarget
    {
        if let given = arguments.value("--endpoint") {
            return BenchSendTarget(endpoint: given, caFile: arguments.value("--ca-file"), serverName: given)
        }
        let started = try await H2OReferenceServer.start(
            directory: directory, threads: settings.serverThreads,
            maximumStreams: settings.streams)
        var target = BenchSendTarget(endpoint: started.url, caFile: started.caFile, serverName: "")
        target.server = started
        target.interrupts = stopOnInterrupt(pid: started.pid)
        target.serverName =
            "\(await H2OReferenceServer.version()) (\(settings.serverThreads) thread), "
            + "mruby handler answering 200"
        return target
    }

    private init(endpoint: String, caFile: String?, serverName: String) {
        self.endpoint = endpoint
        self.caFile = caFile
        self.serverName = serverName
    }

    /// Stops the h2o the bench started, if any.
    func stop() {
        server?.stop()
        interrupts?.cancel()
    }

    /// Ctrl-C or SIGTERM during the run must not leave the h2o the bench started behind.
    static func stopOnInterrupt(pid: pid_t) -> SignalWatcher {
        SignalWatcher(signals: [SIGINT, SIGTERM]) { signalNumber in
            kill(pid, SIGTERM)
            usleep(300_000)
            kill(pid, SIGKILL)
            exit(128 + signalNumber)
        }
    }
}
