// Token authentication as APNs applies it per connection: signature by key id, age, update rate,
// and the connection's first key.

import APNs
import Testing

@testable import APNsSimulator

@Suite struct ProviderTokenAuthenticationTests {
    let keyA: ProviderTokenKey
    let keyB: ProviderTokenKey
    let unknownKey: ProviderTokenKey
    let authenticator: ProviderTokenAuthenticator
    let now: Int64 = 1_800_000_000

    init() throws {
        keyA = try ProviderTokenKey.generate(keyID: "KEYAAAAAAA", teamID: "TEAM000001")
        keyB = try ProviderTokenKey.generate(keyID: "KEYBBBBBBB", teamID: "TEAM000001")
        unknownKey = try ProviderTokenKey.generate(keyID: "KEYCCCCCCC", teamID: "TEAM000001")
        let verifier = try ProviderTokenVerifier(publicKeysByKeyID: [
            keyA.keyID: keyA.publicKeyPEM, keyB.keyID: keyB.publicKeyPEM,
        ])
        authenticator = ProviderTokenAuthenticator(
            verifier: verifier, teamByKeyID: [keyA.keyID: "TEAM000001"], maximumAge: 3600, minimumUpdateInterval: 1200)
    }

    func bearer(_ key: ProviderTokenKey, issuedAt: Int64) throws -> String {
        try key.makeToken(issuedAt: issuedAt).authorizationHeaderValue
    }

    @Test func aValidTokenIsAcceptedAndFixesTheConnectionsKey() throws {
        var connection = ProviderTokenConnectionState()
        let header = try bearer(keyA, issuedAt: now - 10)
        #expect(
            authenticator.check(authorization: header, connection: &connection, now: now)
                == .accepted(keyID: keyA.keyID))
        #expect(connection.keyID == keyA.keyID)
        // The same token again needs no new verification and stays accepted.
        #expect(
            authenticator.check(authorization: header, connection: &connection, now: now + 600)
                == .accepted(keyID: keyA.keyID))
    }

    @Test func aMissingTokenIsMissingProviderToken() {
        var connection = ProviderTokenConnectionState()
        #expect(
            authenticator.check(authorization: nil, connection: &connection, now: now)
                == .rejected(.missingProviderToken))
        #expect(
            authenticator.check(authorization: "", connection: &connection, now: now)
                == .rejected(.missingProviderToken))
    }

    @Test func malformedForgedOrUnknownTokensAreInvalid() throws {
        var connection = ProviderTokenConnectionState()
        let good = try keyA.makeToken(issuedAt: now).jwt
        for header in [
            "bearer", "Basic abc", "bearer not.a.jwt", "bearer " + good.dropLast(4) + "AAAA",
            try bearer(unknownKey, issuedAt: now), good,
        ] {
            #expect(
                authenticator.check(authorization: header, connection: &connection, now: now)
                    == .rejected(.invalidProviderToken), "\(header.prefix(20))")
        }
        #expect(connection.keyID == nil)
    }

    @Test func aTokenOfTheWrongTeamIsInvalid() throws {
        let strict = ProviderTokenAuthenticator(
            verifier: authenticator.verifier, teamByKeyID: [keyA.keyID: "TEAM999999"], maximumAge: 3600,
            minimumUpdateInterval: 1200)
        var connection = ProviderTokenConnectionState()
        #expect(
            strict.check(authorization: try bearer(keyA, issuedAt: now), connection: &connection, now: now)
                == .rejected(.invalidProviderToken))
        #expect(
            strict.check(authorization: try bearer(keyB, issuedAt: now), connection: &connection, now: now)
                == .accepted(keyID: keyB.keyID))
    }

    @Test func aTokenOlderThanAnHourIsExpired() throws {
        var connection = ProviderTokenConnectionState()
        #expect(
            authenticator.check(
                authorization: try bearer(keyA, issuedAt: now - 3601), connection: &connection, now: now)
                == .rejected(.expiredProviderToken))
        #expect(
            authenticator.check(
                authorization: try bearer(keyA, issuedAt: now - 3600), connection: &connection, now: now)
                == .accepted(keyID: keyA.keyID))
        // The connection's token ages too.
        #expect(
            authenticator.check(
                authorization: try bearer(keyA, issuedAt: now - 3600), connection: &connection, now: now + 1)
                == .rejected(.expiredProviderToken))
    }

    @Test func anotherKeyOnTheSameConnectionIsUnrelated() throws {
        var connection = ProviderTokenConnectionState()
        _ = authenticator.check(authorization: try bearer(keyA, issuedAt: now), connection: &connection, now: now)
        #expect(
            authenticator.check(
                authorization: try bearer(keyB, issuedAt: now + 1500), connection: &connection, now: now + 1500)
                == .rejected(.unrelatedKeyIdInToken))
        // A fresh connection may use key B.
        var other = ProviderTokenConnectionState()
        #expect(
            authenticator.check(authorization: try bearer(keyB, issuedAt: now), connection: &other, now: now)
                == .accepted(keyID: keyB.keyID))
    }

    @Test func changingTheTokenWithinTwentyMinutesIsTooManyUpdates() throws {
        var connection = ProviderTokenConnectionState()
        let first = try bearer(keyA, issuedAt: now)
        _ = authenticator.check(authorization: first, connection: &connection, now: now)
        #expect(
            authenticator.check(
                authorization: try bearer(keyA, issuedAt: now + 60), connection: &connection, now: now + 60)
                == .rejected(.tooManyProviderTokenUpdates))
        #expect(APNsErrorReason.tooManyProviderTokenUpdates.httpStatus == 429)
        // ECDSA signatures are randomised: the same claims signed again are another token, so also refused.
        #expect(
            authenticator.check(
                authorization: try bearer(keyA, issuedAt: now), connection: &connection, now: now + 61)
                == .rejected(.tooManyProviderTokenUpdates))
        // The first token stays in force, and after 20 minutes a new one is taken.
        #expect(
            authenticator.check(authorization: first, connection: &connection, now: now + 62)
                == .accepted(keyID: keyA.keyID))
        let renewed = try bearer(keyA, issuedAt: now + 1200)
        #expect(
            authenticator.check(authorization: renewed, connection: &connection, now: now + 1200)
                == .accepted(keyID: keyA.keyID))
        #expect(connection.token.map { "bearer " + $0 } == renewed)
    }

    @Test func theValidatorAppliesTokenAuthenticationBeforeHeaderRules() throws {
        let validator = makeValidator(authentication: .providerToken(authenticator))
        var connection = ConnectionAuthentication()
        // No token: 403 even though the push type is also wrong.
        let noToken = alertRequest(headers: [("apns-push-type", "bogus"), ("apns-topic", "com.example.app")])
        #expect(validator.validate(noToken, connection: &connection, now: now).reason == .missingProviderToken)
        let withToken = alertRequest(headers: [
            ("authorization", try bearer(keyA, issuedAt: now)), ("apns-push-type", "alert"),
            ("apns-topic", "com.example.app"),
        ])
        guard case .accepted(let accepted) = validator.validate(withToken, connection: &connection, now: now) else {
            Issue.record("a signed request should be accepted")
            return
        }
        #expect(accepted.keyID == keyA.keyID)
    }
}
