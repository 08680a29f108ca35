// The channel management client and broadcasts end to end against the APNs simulator over TLS and
// HTTP/2: create, read, list, a broadcast through APNsClient (same pool and retry policy), delete,
// and the broadcast to the deleted channel refused with Apple's reason and not retried.

import APNsSimulator
import HTTP2
import JSON
import Testing

@testable import APNs

@Suite("Channel management and broadcasts against the simulator", .serialized)
struct ChannelClientTests {
    static let group = EventLoopGroup(threadCount: 1)
    let key: ProviderTokenKey

    init() throws {
        key = try ProviderTokenKey.generate(keyID: "KEY1234567", teamID: "TEAM123456")
    }

    func configuration(_ simulator: APNsSimulator) throws -> APNsClient.Configuration {
        var configuration = APNsClient.Configuration(credential: .token(try ProviderTokenSigner(key: key)))
        configuration.endpointOverride = simulator.baseURL
        configuration.trustRoots = .caFile(simulator.caFilePath)
        configuration.connectionsPerEnvironment = 1
        configuration.requestTimeout = .seconds(5)
        return configuration
    }

    @Test func aChannelIsCreatedBroadcastOnAndDeleted() async throws {
        var simulatorConfiguration = SimulatorConfiguration()
        simulatorConfiguration.authentication = .providerToken(
            keys: [SimulatorProviderKey(keyID: key.keyID, publicKeyPEM: key.publicKeyPEM, teamID: key.teamID)],
            maximumAgeSeconds: 3600)
        let simulator = try APNsSimulator(simulatorConfiguration)
        try simulator.start()
        defer { simulator.stop() }
        let configuration = try configuration(simulator)
        let channels = try ChannelManagementClient(configuration: configuration, group: Self.group)
        let client = try APNsClient(configuration: configuration, group: Self.group)

        let channel = try await channels.create(
            bundle: "com.example.app", environment: .sandbox, storagePolicy: .mostRecentMessageStored)
        let read = try await channels.read(bundle: "com.example.app", environment: .sandbox, channel: channel)
        #expect(read.storagePolicy == .mostRecentMessageStored)
        #expect(read.pushType == "LiveActivity")
        #expect(try await channels.list(bundle: "com.example.app", environment: .sandbox) == [channel])

        let broadcast = APNsRequest(
            channel: channel, environment: .sandbox, bundle: "com.example.app",
            payload: ["aps": ["event": "update", "timestamp": 1_700_000_000, "content-state": ["score": "1-0"]]])
        let delivered = await client.send(broadcast, policy: RetryPolicy(maximumAttempts: 3))
        #expect(delivered.status == .delivered, "\(delivered.summary)")
        #expect(delivered.response?.apnsID == broadcast.apnsID, "the id comes back in apns-request-id")
        let accepted = simulator.accepted.last
        #expect(accepted?.channelID == channel.value)
        #expect(accepted?.header("apns-channel-id") == channel.value)
        #expect(accepted?.header("apns-topic") == nil)

        try await channels.delete(bundle: "com.example.app", environment: .sandbox, channel: channel)
        #expect(try await channels.list(bundle: "com.example.app", environment: .sandbox).isEmpty)
        let refused = await client.send(broadcast, policy: RetryPolicy(maximumAttempts: 3))
        #expect(refused.status == .rejected)
        #expect(refused.response?.reason == .channelNotRegistered)
        #expect(refused.attempts.count == 1)

        do {
            _ = try await channels.read(bundle: "com.example.app", environment: .sandbox, channel: channel)
            Issue.record("read a deleted channel")
        } catch {
            #expect(error.status == 400)
            #expect(error.reason == .channelNotRegistered)
        }
        await channels.shutdown()
        await client.shutdown(gracePeriod: .seconds(1))
    }

    @Test func eachEnvironmentHasItsOwnManagementServer() {
        #expect(APNsEnvironment.sandbox.channelManagementHost == "api-manage-broadcast.sandbox.push.apple.com")
        #expect(APNsEnvironment.sandbox.channelManagementPort == 2195)
        #expect(APNsEnvironment.production.channelManagementHost == "api-manage-broadcast.push.apple.com")
        #expect(APNsEnvironment.production.channelManagementPort == 2196)
    }
}
