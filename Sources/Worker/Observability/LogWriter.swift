// Structured JSON logs: one object per line on stdout, written by a background thread from a bounded
// buffer so that a slow stdout never blocks the pipeline (lines past the bound are counted and dropped).

import Dispatch
import Foundation
import JSON
import Platform
import Synchronization

/// The shared end of every `Logger`: level, rate limiting, redaction, formatting and output.
///
/// Each line is `{"time":"2026-11-29T12:00:00.123Z","level":"info","message":"...","fields":{...}}`
/// (`fields` only when there are any). Lines at `warning` and above, and any line given a rate-limit key,
/// are rate-limited per key (the key defaults to the message): `rateLimitBurst` lines per
/// `rateLimitInterval`, then one summary line `suppressed K repeated log lines` when the interval ends.
///
/// - Important: Thread-safe. Emitting formats the line on the caller's thread and appends it to a buffer
///   under a short lock; a dedicated thread writes batches to the output. Call `close()` at shutdown to
///   write what is buffered.
public final class LogWriter: Sendable {
    public struct Configuration: Sendable {
        /// Lines below this level are discarded before they are built. Default: `info`.
        public var level: LogLevel
        /// Lines of one key written per interval before the rest are suppressed. Default: `5`.
        public var rateLimitBurst: Int
        /// Default: 10 seconds.
        public var rateLimitInterval: Duration
        /// Bytes of lines waiting for the output; past it new lines are dropped and counted. Default: 1 MiB.
        public var bufferCapacity: Int

        public init(
            level: LogLevel = .info, rateLimitBurst: Int = 5, rateLimitInterval: Duration = .seconds(10),
            bufferCapacity: Int = 1 << 20
        ) {
            self.level = level
            self.rateLimitBurst = rateLimitBurst
            self.rateLimitInterval = rateLimitInterval
            self.bufferCapacity = bufferCapacity
        }
    }

    /// Receives batches of complete lines, in order, from one thread at a time.
    public typealias Output = @Sendable ([UInt8]) -> Void

    private struct Pending {
        var bytes: [UInt8] = []
        var droppedLines = 0
        var isClosed = false
    }

    private let levelRawValue: Atomic<Int>
    private let rateLimitIntervalSeconds: Double
    private let bufferCapacity: Int
    private let limiter: Mutex<LogRateLimiter>
    private let pending = Mutex(Pending())
    /// Held while a batch is taken and written, so that batches reach the output in order.
    private let writeTurn = Mutex(())
    private let wakeup = DispatchSemaphore(value: 0)
    private let writerStopped = DispatchSemaphore(value: 0)
    private let hasWriterThread: Bool
    private let output: Output
    private let wallClock: WallClock
    private let monotonic: MonotonicNanoseconds

    /// - Parameters:
    ///   - output: where batches of lines go; standard output by default.
    ///   - startsWriterThread: `false` leaves writing to `flush()` (tests that want determinism).
    public init(
        configuration: Configuration = Configuration(), output: @escaping Output = LogWriter.standardOutput,
        startsWriterThread: Bool = true, wallClock: @escaping WallClock = SystemClocks.wall,
        monotonic: @escaping MonotonicNanoseconds = SystemClocks.monotonic
    ) {
        levelRawValue = Atomic(configuration.level.rawValue)
        bufferCapacity = max(4096, configuration.bufferCapacity)
        let rateLimiter = LogRateLimiter(
            burst: configuration.rateLimitBurst, interval: configuration.rateLimitInterval)
        rateLimitIntervalSeconds = Double(rateLimiter.intervalNanoseconds) / 1e9
        limiter = Mutex(rateLimiter)
        self.output = output
        self.wallClock = wallClock
        self.monotonic = monotonic
        hasWriterThread = startsWriterThread
        if startsWriterThread {
            do {
                try NamedThread.detached(name: "apns-worker.log") { [self] in runWriterLoop() }
            } catch {
                fatalError("\(error): the log needs its writer thread")
            }
        }
    }

    /// The minimum level written; may be changed at any time (a config reload).
    public var level: LogLevel {
        get { LogLevel(rawValue: levelRawValue.load(ordering: .relaxed)) ?? .info }
        set { levelRawValue.store(newValue.rawValue, ordering: .relaxed) }
    }

    /// Writes everything buffered (and summaries of rate-limit intervals that have ended) before returning.
    public func flush() {
        sweepRateLimits()
        drain()
    }

    /// Flushes and stops the writer thread. Lines emitted afterwards are written by the caller's flushes only.
    public func close() {
        let wasOpen = pending.withLock { pending in
            defer { pending.isClosed = true }
            return !pending.isClosed
        }
        guard wasOpen else { return }
        if hasWriterThread {
            wakeup.signal()
            writerStopped.wait()
        }
        flush()
    }

    /// Writes to file descriptor 1, retrying short writes and interruptions; gives a batch up on a hard error
    /// (a closed stdout) since there is nowhere left to report it.
    public static let standardOutput: Output = { bytes in
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(1, buffer.baseAddress! + offset, buffer.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && (errno == EINTR || errno == EAGAIN) {
                    if errno == EAGAIN {
                        var descriptor = pollfd(fd: 1, events: Int16(POLLOUT), revents: 0)
                        _ = poll(&descriptor, 1, 100)
                    }
                } else {
                    return
                }
            }
        }
    }

    // MARK: Emitting

    /// - Parameter redactedContext: context fields that went through `LogRedaction` already.
    func emit(
        _ level: LogLevel, message: String, fields: JSONObject, redactedContext: JSONObject, rateLimitKey: String?
    ) {
        if level >= .warning || rateLimitKey != nil {
            let key = rateLimitKey ?? message
            let now = monotonic()
            switch limiter.withLock({ $0.decide(key: key, level: level, now: now) }) {
            case .suppress:
                return
            case .emit(let summary):
                if let summary { append(summaryLine(summary)) }
            }
        }
        var merged = redactedContext
        for member in LogRedaction.redact(fields) { merged[member.key] = member.value }
        append(line(level: level, message: message, redactedFields: merged))
    }

    private func line(level: LogLevel, message: String, redactedFields fields: JSONObject) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(160 + message.utf8.count)
        line.append(contentsOf: #"{"time":""#.utf8)
        appendTimestamp(into: &line)
        line.append(contentsOf: #"","level":""#.utf8)
        line.append(contentsOf: level.name.utf8)
        line.append(contentsOf: #"","message":"#.utf8)
        JSONWriter.writeString(LogRedaction.scrub(message), into: &line)
        if !fields.isEmpty {
            line.append(contentsOf: #","fields":"#.utf8)
            JSONWriter.write(.object(fields), into: &line)
        }
        line.append(contentsOf: "}\n".utf8)
        return line
    }

    private func summaryLine(_ suppression: LogRateLimiter.Suppression) -> [UInt8] {
        line(
            level: suppression.level, message: "suppressed \(suppression.count) repeated log lines",
            redactedFields: [
                "repeated_message": .string(LogRedaction.scrub(suppression.key)),
                "suppressed": .int(Int64(suppression.count)), "interval_seconds": .double(rateLimitIntervalSeconds),
            ])
    }

    /// RFC 3339 in UTC with milliseconds: `2026-11-29T12:00:00.123Z`.
    private func appendTimestamp(into output: inout [UInt8]) {
        let (seconds, nanoseconds) = wallClock()
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func digits(_ value: Int, _ width: Int) {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            var value = value
            while divisor > 0 {
                output.append(UInt8(ascii: "0") + UInt8((value / divisor) % 10))
                value %= divisor
                divisor /= 10
            }
        }
        digits(Int(parts.tm_year) + 1900, 4)
        output.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2)
        output.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2)
        output.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2)
        output.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2)
        output.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2)
        output.append(UInt8(ascii: "."))
        digits(Int(nanoseconds / 1_000_000), 3)
        output.append(UInt8(ascii: "Z"))
    }

    private func append(_ line: [UInt8]) {
        let wasEmpty = pending.withLock { pending -> Bool in
            guard pending.bytes.count + line.count <= bufferCapacity else {
                pending.droppedLines += 1
                return false
            }
            let wasEmpty = pending.bytes.isEmpty
            pending.bytes.append(contentsOf: line)
            return wasEmpty
        }
        if wasEmpty && hasWriterThread { wakeup.signal() }
    }

    // MARK: Writing

    private func sweepRateLimits() {
        let now = monotonic()
        for summary in limiter.withLock({ $0.sweep(now: now) }) {
            append(summaryLine(summary))
        }
    }

    private func drain() {
        writeTurn.withLock { _ in
            var (bytes, dropped) = pending.withLock { pending in
                defer {
                    pending.bytes = []
                    pending.bytes.reserveCapacity(4096)
                    pending.droppedLines = 0
                }
                return (pending.bytes, pending.droppedLines)
            }
            if dropped > 0 {
                bytes += line(
                    level: .warning, message: "dropped \(dropped) log lines: the output could not keep up",
                    redactedFields: ["dropped": .int(Int64(dropped))])
            }
            guard !bytes.isEmpty else { return }
            output(bytes)
        }
    }

    private func runWriterLoop() {
        while true {
            // Woken when the buffer stops being empty; the timeout ends rate-limit intervals on time.
            _ = wakeup.wait(timeout: .now() + .milliseconds(500))
            let isClosed = pending.withLock { $0.isClosed }
            flush()
            if isClosed { break }
        }
        writerStopped.signal()
    }
}
