// Starting and stopping: ports, the CA file, the generated certificate, and stop() closing idle and
// half-open connections and joining every thread, many times in one process. (Wire behaviour is tested
// from Python in Tests/System/test_simulator.py.)

import APNs
import COpenSSL
import Platform
import TestSupport
import Testing

@testable import APNsSimulator

#if canImport(Glibc)
import Glibc
#endif

func fileExists(_ path: String) -> Bool { access(path, F_OK) == 0 }

@Suite(.serialized) struct SimulatorLifecycleTests {
    @Test func startPicksAPortAndStopClosesIt() throws {
        let simulator = try APNsSimulator(SimulatorConfiguration())
        let port = try simulator.start()
        #expect(port > 0 && port == simulator.port)
        #expect(simulator.baseURL == "https://127.0.0.1:\(port)")
        let client = connectLoopback(port: port)
        #expect(client >= 0)
        #expect(eventuallyBlocking { simulator.stats.connectionsAccepted == 1 })
        // A child process another test starts meanwhile would hold the listener open until its exec.
        let refused = ChildSpawnFence.closingListener {
            simulator.stop()
            return connectLoopback(port: port) == -1
        }
        #expect(refused)
        if client >= 0 {
            // The simulator closed our connection: reading gives end of file, not a hang.
            var byte: UInt8 = 0
            #expect(read(client, &byte, 1) <= 0)
            close(client)
        }
    }

    @Test func startTwiceIsRefused() throws {
        let simulator = try APNsSimulator(SimulatorConfiguration())
        defer { simulator.stop() }
        try simulator.start()
        #expect(throws: SimulatorError.self) { try simulator.start() }
    }

    @Test func writesTheGeneratedCertificateForLocalhostAnd127001() throws {
        let simulator = try APNsSimulator(SimulatorConfiguration())
        let path = simulator.caFilePath
        #expect(fileExists(path))
        let file = try #require(fopen(path, "r"))
        let certificate = PEM_read_X509(file, nil, nil, nil)
        fclose(file)
        let x509 = try #require(certificate)
        defer { X509_free(x509) }
        #expect(X509_check_host(x509, "localhost", 9, 0, nil) == 1)
        #expect(X509_check_ip_asc(x509, "127.0.0.1", 0) == 1)
        #expect(X509_check_host(x509, "example.com", 11, 0, nil) != 1)
        let key = try #require(X509_get0_pubkey(x509))
        #expect(EVP_PKEY_get_base_id(key) == EVP_PKEY_EC)
        #expect(EVP_PKEY_get_bits(key) == 256)
        simulator.stop()
        #expect(!fileExists(path), "stop() removes the temporary CA file")
    }

    @Test func caOutputPathIsKeptAfterStop() throws {
        var configuration = SimulatorConfiguration()
        let path = "/tmp/apns-simulator-test-ca-\(getpid()).pem"
        configuration.caOutputPath = path
        let simulator = try APNsSimulator(configuration)
        try simulator.start()
        simulator.stop()
        #expect(simulator.caFilePath == path)
        #expect(fileExists(path))
        unlink(path)
    }

    @Test func manySimulatorsStartAndStopWithConnectionsOpen() throws {
        for _ in 0..<25 {
            let simulator = try APNsSimulator(SimulatorConfiguration())
            let port = try simulator.start()
            // A client that connects and never finishes the TLS handshake, and one that sends garbage.
            let silent = connectLoopback(port: port)
            let noisy = connectLoopback(port: port)
            var garbage = Array("GET / HTTP/1.1\r\n\r\n".utf8)
            _ = write(noisy, &garbage, garbage.count)
            simulator.stop()
            close(silent)
            close(noisy)
        }
    }

    @Test func releasingARunningSimulatorStopsIt() throws {
        let refused = try ChildSpawnFence.closingListener {
            var port = 0
            do {
                let simulator = try APNsSimulator(SimulatorConfiguration())
                port = try simulator.start()
            }
            return connectLoopback(port: port) == -1
        }
        #expect(refused)
    }

    @Test func badFilesAndKeysAreReportedClearly() {
        var files = SimulatorConfiguration()
        files.tls = .files(certificate: "/nonexistent/cert.pem", privateKey: "/nonexistent/key.pem")
        do {
            _ = try APNsSimulator(files)
            Issue.record("a missing certificate file must fail")
        } catch {
            #expect(error.code == .tls)
            #expect(error.message.contains("/nonexistent/cert.pem"))
        }
        var tokens = SimulatorConfiguration()
        tokens.authentication = .providerToken(keys: [SimulatorProviderKey(keyID: "KEYAAAAAAA", publicKeyPEM: "nope")])
        #expect(throws: SimulatorError.self) { try APNsSimulator(tokens) }
        var empty = SimulatorConfiguration()
        empty.authentication = .providerToken(keys: [])
        #expect(throws: SimulatorError.self) { try APNsSimulator(empty) }
    }

    @Test func listeningOnATakenPortFails() throws {
        let first = try APNsSimulator(SimulatorConfiguration())
        defer { first.stop() }
        var configuration = SimulatorConfiguration()
        configuration.port = try first.start()
        let second = try APNsSimulator(configuration)
        do {
            try second.start()
            Issue.record("binding a taken port must fail")
        } catch {
            #expect(error.code == .network)
            #expect(error.message.contains(String(configuration.port)))
        }
    }

    @Test func connectionsBeyondTheMaximumAreClosedAtOnce() throws {
        var configuration = SimulatorConfiguration()
        configuration.maximumConnections = 2
        let simulator = try APNsSimulator(configuration)
        defer { simulator.stop() }
        let port = try simulator.start()
        let kept = [connectLoopback(port: port), connectLoopback(port: port)]
        #expect(eventuallyBlocking { simulator.stats.connectionsAccepted == 2 })
        let refused = connectLoopback(port: port)
        #expect(eventuallyBlocking { simulator.stats.connectionsRefused == 1 })
        var byte: UInt8 = 0
        #expect(read(refused, &byte, 1) <= 0, "the refused connection is closed")
        close(refused)
        // Once one has ended (its handshake fails on our close), a new connection is served again.
        close(kept[0])
        #expect(eventuallyBlocking { simulator.stats.handshakeFailures == 1 })
        let again = connectLoopback(port: port)
        #expect(eventuallyBlocking { simulator.stats.connectionsAccepted == 4 })
        #expect(simulator.stats.connectionsRefused == 1)
        close(again)
        close(kept[1])
    }

    @Test func setFaultsValidatesAndTakesEffect() throws {
        let simulator = try APNsSimulator(SimulatorConfiguration())
        defer { simulator.stop() }
        var faults = SimulatorFaults()
        faults.maxConcurrentStreams = 1
        faults.failureRate = 0.5
        try simulator.setFaults(faults)
        #expect(simulator.faults == faults)
        faults.failureRate = -1
        #expect(throws: SimulatorError.self) { try simulator.setFaults(faults) }
        #expect(simulator.faults.failureRate == 0.5)
    }
}
