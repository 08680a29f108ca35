// Token refresh timing with an injected clock: reuse inside the window, refresh at the configured
// age, one signature per refresh under many concurrent callers, forced refresh held to 20 minutes.

import Foundation
import Synchronization
import Testing

@testable import APNs

/// A clock the test moves by hand.
final class ManualTokenClock: Sendable {
    private let seconds: Mutex<Int64>
    init(_ start: Int64) { seconds = Mutex(start) }
    var now: Int64 { seconds.withLock { $0 } }
    func advance(_ delta: Int64) { seconds.withLock { $0 += delta } }
    var function: @Sendable () -> Int64 { { [self] in now } }
}

@Suite struct ProviderTokenSignerTests {
    static let start: Int64 = 1_764_000_000
    let clock = ManualTokenClock(start)
    let key: ProviderTokenKey

    init() throws {
        key = try ProviderTokenKey.generate(keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
    }

    func makeSigner(refreshAge: Int64 = ProviderTokenSigner.defaultRefreshAge) throws -> ProviderTokenSigner {
        try ProviderTokenSigner(key: key, refreshAge: refreshAge, now: clock.function)
    }

    /// Calls `token()` from `count` threads released at the same instant; returns the tokens.
    func concurrentTokens(
        _ signer: ProviderTokenSigner, count: Int = 64,
        alsoInvalidate: Bool = false
    ) -> [ProviderToken] {
        let results = Mutex<[ProviderToken]>([])
        let ready = Atomic<Int>(0)
        let go = Atomic<Bool>(false)
        let done = DispatchGroup()
        for index in 0..<count {
            done.enter()
            let thread = Thread {
                ready.add(1, ordering: .sequentiallyConsistent)
                while !go.load(ordering: .acquiring) { sched_yield() }
                if alsoInvalidate && index % 2 == 0 { signer.invalidate() }
                let token = try? signer.token()
                if let token { results.withLock { $0.append(token) } }
                done.leave()
            }
            thread.start()
        }
        while ready.load(ordering: .sequentiallyConsistent) < count { usleep(100) }
        go.store(true, ordering: .releasing)
        done.wait()
        return results.withLock { $0 }
    }

    @Test func firstCallSignsAndLaterCallsReuseTheToken() throws {
        let signer = try makeSigner()
        #expect(signer.tokenAge == nil)
        let first = try signer.token()
        #expect(first.issuedAt == Self.start)
        clock.advance(49 * 60 + 59)
        #expect(try signer.token() == first)
        #expect(signer.signatureCount == 1)
        #expect(signer.tokenAge == Int64(49 * 60 + 59))
    }

    @Test func refreshesExactlyAtTheConfiguredAge() throws {
        let signer = try makeSigner(refreshAge: 30 * 60)
        let first = try signer.token()
        clock.advance(30 * 60 - 1)
        #expect(try signer.token() == first)
        clock.advance(1)
        let second = try signer.token()
        #expect(second != first)
        #expect(second.issuedAt == Self.start + 30 * 60)
        #expect(signer.tokenAge == 0)
        #expect(signer.signatureCount == 2)
    }

    @Test func defaultRefreshIsAtFiftyMinutes() throws {
        let signer = try ProviderTokenSigner(key: key, now: clock.function)
        let first = try signer.token()
        clock.advance(50 * 60 - 1)
        #expect(try signer.token() == first)
        clock.advance(1)
        #expect(try signer.token().issuedAt == Self.start + 50 * 60)
    }

    @Test(arguments: [0, 60, 1199, 3601, 86_400, -1] as [Int64])
    func refreshAgeOutsideTwentyToSixtyMinutesIsRejected(age: Int64) {
        #expect {
            _ = try ProviderTokenSigner(key: key, refreshAge: age, now: clock.function)
        } throws: { error in
            (error as? CredentialError)?.code == .invalidConfiguration
                && "\(error)".contains("between 1200 s (20 minutes) and 3600 s (60 minutes)")
        }
    }

    @Test(arguments: [1200, 3600] as [Int64])
    func refreshAgeAtTheWindowEdgesIsAccepted(age: Int64) throws {
        #expect(try makeSigner(refreshAge: age).refreshAge == age)
    }

    @Test func sixtyFourConcurrentCallersCauseOneSignatureOnFirstUse() throws {
        let signer = try makeSigner()
        let tokens = concurrentTokens(signer)
        #expect(tokens.count == 64)
        #expect(Set(tokens).count == 1)
        #expect(signer.signatureCount == 1)
    }

    @Test func sixtyFourConcurrentCallersCauseOneSignaturePerRefresh() throws {
        let signer = try makeSigner()
        let first = try signer.token()
        for round in 1...3 {
            clock.advance(ProviderTokenSigner.defaultRefreshAge)
            let tokens = concurrentTokens(signer)
            #expect(Set(tokens).count == 1)
            #expect(tokens.first != first)
            #expect(signer.signatureCount == 1 + round)
        }
    }

    @Test func forcedRefreshWaitsUntilTheTokenIsTwentyMinutesOld() throws {
        let signer = try makeSigner()
        let first = try signer.token()
        clock.advance(5 * 60)
        signer.invalidate(first)
        #expect(try signer.token() == first)  // 5 minutes: replacing now would risk TooManyProviderTokenUpdates
        clock.advance(15 * 60 - 1)
        #expect(try signer.token() == first)
        clock.advance(1)
        let second = try signer.token()  // 20 minutes: the pending request is honoured
        #expect(second.issuedAt == Self.start + 20 * 60)
        #expect(signer.signatureCount == 2)
        // The request was used up: no further early refresh.
        clock.advance(25 * 60)
        #expect(try signer.token() == second)
    }

    @Test func forcedRefreshAfterTwentyMinutesSignsAtOnce() throws {
        let signer = try makeSigner()
        let first = try signer.token()
        clock.advance(21 * 60)
        signer.invalidate()
        let second = try signer.token()
        #expect(second != first && second.issuedAt == Self.start + 21 * 60)
    }

    @Test func rejectionOfAnAlreadyReplacedTokenIsIgnored() throws {
        let signer = try makeSigner()
        let first = try signer.token()
        clock.advance(50 * 60)
        let second = try signer.token()
        clock.advance(25 * 60)
        signer.invalidate(first)  // a late report about the old token
        #expect(try signer.token() == second)
        signer.invalidate(second)
        #expect(try signer.token() != second)
    }

    @Test func manyConcurrentInvalidationsCauseOneSignature() throws {
        let signer = try makeSigner()
        _ = try signer.token()
        clock.advance(25 * 60)
        let tokens = concurrentTokens(signer, alsoInvalidate: true)
        #expect(signer.signatureCount == 2)
        #expect(Set(tokens).count <= 2)  // callers before the first invalidation may still get the old token
        #expect(try signer.token().issuedAt == Self.start + 25 * 60)
    }

    @Test func clockSteppingBackKeepsTheToken() throws {
        let signer = try makeSigner()
        let first = try signer.token()
        clock.advance(-600)
        #expect(try signer.token() == first)
        #expect(signer.tokenAge == 0)
        #expect(signer.signatureCount == 1)
    }

    @Test func exposesKeyAndTeamIDs() throws {
        let signer = try makeSigner()
        #expect(signer.keyID == "ABC123DEFG" && signer.teamID == "DEF123GHIJ")
    }

    @Test func tokensVerifyWithTheSignersPublicKey() throws {
        let signer = try makeSigner()
        let verifier = try ProviderTokenVerifier(publicKeysByKeyID: [key.keyID: key.publicKeyPEM])
        let verified = try verifier.verify(try signer.token().jwt)
        #expect(verified.teamID == "DEF123GHIJ" && verified.issuedAt == Self.start)
    }

    @Test func systemClockIsCurrentUnixTime() {
        let difference = ProviderTokenSigner.systemClock() - Int64(Date().timeIntervalSince1970)
        #expect(abs(difference) <= 1)
    }
}
