// The reference tools `bench send` measures against: an h2o server (Debian h2o, mruby handler that
// answers 200) with a self-signed certificate on a free loopback port, and h2load (Debian nghttp2-client)
// sending the same request shape.

import ChildProcesses
import Foundation
import Glibc
import Synchronization

/// A child process run to completion.
enum ChildProcess {
    struct Result {
        var status: Int32
        var output: String
    }

    /// Runs `path` with `arguments`; output (stdout and stderr) goes through a temporary file, so a
    /// chatty child can never block on a full pipe.
    static func run(_ path: String, _ arguments: [String], directory: String) async throws -> Result {
        let outputPath = directory + "/child-\(UUID().uuidString).log"
        let child = try SpawnedProcess.spawn(path, arguments, outputFile: outputPath)
        let status = await child.waitForExit()
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(atPath: outputPath)
        return Result(status: status, output: text)
    }
}

/// h2o on 127.0.0.1 with a fresh self-signed certificate, answering every request with 200 and no body.
final class H2OReferenceServer {
    let port: Int
    let caFile: String
    let directory: String
    private let process: SpawnedProcess

    var url: String { "https://127.0.0.1:\(port)" }

    /// Writes the certificate and config into `directory` and starts h2o in the foreground (worker mode,
    /// so it never daemonizes); returns once it accepts connections.
    static func start(directory: String, threads: Int, maximumStreams: Int) async throws -> H2OReferenceServer {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/h2o") else {
            throw BenchError("h2o is not installed (Debian package h2o); or give --endpoint URL of a running server")
        }
        let certificate = directory + "/h2o-cert.pem"
        let key = directory + "/h2o-key.pem"
        let made = try await ChildProcess.run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            ], directory: directory)
        guard made.status == 0 else { throw BenchError("openssl could not make a certificate: \(made.output)") }
        let port = freeLoopbackPort()
        let configuration = """
            listen:
              host: 127.0.0.1
              port: \(port)
              ssl:
                certificate-file: \(certificate)
                key-file: \(key)
                minimum-version: TLSv1.2
            num-threads: \(threads)
            http2-max-concurrent-requests-per-connection: \(max(100, maximumStreams))
            hosts:
              default:
                paths:
                  /:
                    mruby.handler: |
                      Proc.new do |env|
                        [200, {}, []]
                      end

            """
        let configPath = directory + "/h2o.conf"
        try configuration.write(toFile: configPath, atomically: true, encoding: .utf8)
        let log = directory + "/h2o.log"
        let process = try SpawnedProcess.spawn(
            "/usr/bin/h2o", ["--mode", "worker", "--conf", configPath],
            outputFile: log)
        let server = H2OReferenceServer(port: port, caFile: certificate, directory: directory, process: process)
        for _ in 0..<250 {
            if !process.isRunning {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                throw BenchError("h2o exited at start:\n\(text)")
            }
            if loopbackPortAcceptsConnections(port) { return server }
            try await Task.sleep(for: .milliseconds(20))
        }
        server.stop()
        throw BenchError("h2o did not accept connections on 127.0.0.1:\(port) within 5 s")
    }

    private init(port: Int, caFile: String, directory: String, process: SpawnedProcess) {
        self.port = port
        self.caFile = caFile
        self.directory = directory
        self.process = process
    }

    /// The h2o version line, e.g. "h2o version 2.2.5".
    static func version() async -> String {
        let result = try? await ChildProcess.run("/usr/bin/h2o", ["--version"], directory: NSTemporaryDirectory())
        return result?.output.split(separator: "\n").first.map(String.init) ?? "h2o"
    }

    /// SIGTERM, SIGKILL after 3 s; reaps the process.
    func stop() {
        process.terminate()
    }

    /// The process id, for a signal handler that must stop the server when the bench is interrupted.
    var pid: pid_t { process.pid }
}

/// h2load's figures for one run.
struct H2LoadResult {
    var requestsPerSecond: Double
    var succeeded: Int
    var failed: Int
    var seconds: Double
    var cpuMicroseconds: Int64
    var peakRSSKiB: Int
    var meanLatencyMilliseconds: Double?
    var maximumLatencyMilliseconds: Double?

    /// Runs h2load with `arguments` and reads "finished in Xs, Y req/s" and the request counts.
    static func run(arguments: [String], directory: String) async throws -> H2LoadResult {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/h2load") else {
            throw BenchError("h2load is not installed (Debian package nghttp2-client)")
        }
        let cpuBefore = ProcessReadings.cpuMicroseconds(children: true)
        let result = try await ChildProcess.run("/usr/bin/h2load", arguments, directory: directory)
        let cpu = ProcessReadings.cpuMicroseconds(children: true) - cpuBefore
        guard result.status == 0,
            let finished = result.output.split(separator: "\n")
                .first(where: { $0.hasPrefix("finished in ") })
        else {
            throw BenchError("h2load failed (status \(result.status)):\n\(result.output.suffix(2000))")
        }
        // finished in 1.18s, 84980.11 req/s, 2.03MB/s
        let parts = finished.dropFirst("finished in ".count).split(separator: ",")
        let seconds = Double(parts[0].trimmingCharacters(in: .whitespaces).dropLast()) ?? 0
        let rate =
            Double(
                parts.count > 1
                    ? parts[1].trimmingCharacters(in: .whitespaces)
                        .split(separator: " ")[0] : "0") ?? 0
        var succeeded = 0
        var failed = 0
        var mean: Double?
        var maximum: Double?
        for line in result.output.split(separator: "\n") {
            if line.hasPrefix("requests: ") {
                let words = line.split(separator: " ")
                for (index, word) in words.enumerated() where index > 0 {
                    if word.hasPrefix("succeeded") { succeeded = Int(words[index - 1]) ?? 0 }
                    if word.hasPrefix("failed") { failed = Int(words[index - 1]) ?? 0 }
                }
            }
            if line.hasPrefix("time for request:") {
                let values = line.dropFirst("time for request:".count).split(separator: " ")
                if values.count >= 3 {
                    maximum = milliseconds(String(values[1]))
                    mean = milliseconds(String(values[2]))
                }
            }
        }
        return H2LoadResult(
            requestsPerSecond: rate, succeeded: succeeded, failed: failed, seconds: seconds,
            cpuMicroseconds: cpu, peakRSSKiB: ProcessReadings.peakRSSKiB(children: true),
            meanLatencyMilliseconds: mean, maximumLatencyMilliseconds: maximum)
    }

    /// "1.10ms", "639us", "3.74s" in milliseconds.
    private static func milliseconds(_ text: String) -> Double? {
        if text.hasSuffix("ms") { return Double(text.dropLast(2)) }
        if text.hasSuffix("us") { return Double(text.dropLast(2)).map { $0 / 1000 } }
        if text.hasSuffix("s") { return Double(text.dropLast()).map { $0 * 1000 } }
        return nil
    }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
