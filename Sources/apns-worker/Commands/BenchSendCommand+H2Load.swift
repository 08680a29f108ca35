// The comparison run: h2load with the same request shape (method, headers, body size, distinct device
// paths, connections and streams) against the same server.

import Foundation

extension BenchSendCommand {
    static func runH2Load(
        workload: BenchSendWorkload, endpoint: String, count: Int, connections: Int, streams: Int,
        directory: String
    ) async throws -> H2LoadResult {
        let bodyFile = directory + "/body.json"
        try Data(workload.payload).write(to: URL(fileURLWithPath: bodyFile))
        // Distinct device paths as our run uses; h2load takes scheme, host and port from the first line.
        let uriFile = directory + "/uris.txt"
        var lines: [String] = []
        for (index, token) in workload.tokens.enumerated() {
            lines.append((index == 0 ? endpoint : "") + "/3/device/" + token.hex)
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: uriFile, atomically: true, encoding: .utf8)
        var arguments = [
            "-n", String(count), "-c", String(connections), "-m", String(streams), "-t", "1",
            "-d", bodyFile, "-i", uriFile,
        ]
        for header in workload.h2loadHeaders { arguments += ["-H", header] }
        // Warm-up run, as for ours.
        _ = try await H2LoadResult.run(
            arguments: ["-n", String(min(count, max(2_000, connections * streams * 4)))]
                + arguments.dropFirst(2), directory: directory)
        return try await H2LoadResult.run(arguments: arguments, directory: directory)
    }
}
