// `kafka-mock --port`: a loopback port of the user's choosing that carries each connection to a mock
// broker. librdkafka 2.0's mock cluster binds its brokers to ports the OS picks and has no setting for
// them, so a fixed bootstrap address (the one a worker.yaml names) is this forwarder instead.

import ChildProcesses
import Foundation
import Platform

/// Listens on 127.0.0.1:`port` and copies bytes both ways between each accepted connection and a new
/// connection to the target broker, each direction on a thread of its own (the calls block).
///
/// A client bootstraps through it and then reaches every broker at the address the broker's metadata
/// advertises (its own port on 127.0.0.1), so only the bootstrap connection passes through here.
enum KafkaMockPortForwarder {
    struct StartError: Error, CustomStringConvertible {
        var description: String
    }

    /// Binds the port and starts accepting; throws when the port cannot be had (it is in use, say).
    static func start(port: UInt16, targetPort: UInt16) throws {
        let listener = closeOnExecSocket()
        guard listener >= 0 else { throw StartError(description: "cannot open a socket: \(errnoText())") }
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        let bound = withLoopbackAddress(port: Int(port)) { bind(listener, $0, $1) }
        guard bound == 0, listen(listener, 64) == 0 else {
            let reason = errnoText()
            close(listener)
            throw StartError(
                description: "cannot listen on 127.0.0.1:\(port): \(reason); choose another --port, or leave it "
                    + "out to use the brokers' own ports")
        }
        try NamedThread.detached(name: "kafka-mock-port") {
            while true {
                let client = acceptCloseOnExec(listener)
                if client < 0 {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    return
                }
                connectAndPump(client, targetPort: targetPort)
            }
        }
    }

    private static func connectAndPump(_ client: Int32, targetPort: UInt16) {
        let broker = closeOnExecSocket()
        let connected = withLoopbackAddress(port: Int(targetPort)) { connect(broker, $0, $1) }
        guard broker >= 0, connected == 0 else {
            if broker >= 0 { close(broker) }
            close(client)
            return
        }
        // Each side's descriptor is closed by the thread that finishes last, after both shut down.
        let finished = Finished(client: client, broker: broker)
        do {
            try NamedThread.detached(name: "kafka-mock-up") { pump(from: client, to: broker, finished) }
            try NamedThread.detached(name: "kafka-mock-down") { pump(from: broker, to: client, finished) }
        } catch {
            shutdown(client, Int32(SHUT_RDWR))
            shutdown(broker, Int32(SHUT_RDWR))
        }
    }

    /// Copies until `source` ends or fails, then ends `destination`'s writing half.
    private static func pump(from source: Int32, to destination: Int32, _ finished: Finished) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        copying: while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            var sent = 0
            while sent < count {
                let written = buffer.withUnsafeBytes { send(destination, $0.baseAddress! + sent, count - sent, 0) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { break copying }
                sent += written
            }
        }
        shutdown(destination, Int32(SHUT_WR))
        shutdown(source, Int32(SHUT_RD))
        finished.oneSideDone()
    }

    private final class Finished: @unchecked Sendable {
        let client: Int32
        let broker: Int32
        private let lock = NSLock()
        private var sidesLeft = 2

        init(client: Int32, broker: Int32) {
            self.client = client
            self.broker = broker
        }

        func oneSideDone() {
            lock.lock()
            sidesLeft -= 1
            let last = sidesLeft == 0
            lock.unlock()
            if last {
                close(client)
                close(broker)
            }
        }
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }
}
