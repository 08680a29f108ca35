// HTTP2Request keeps its pseudo-headers and fields packed in one buffer; these tests pin that every
// property reads back what was set, in order, with its HPACK flag, whichever way the request was made.

import Testing

@testable import HTTP2

@Suite struct HTTP2RequestPackingTests {
    @Test func propertiesReadBackWhatTheInitialiserPacked() {
        let request = HTTP2Request(
            method: "POST", scheme: "https", authority: "api.push.apple.com", path: "/3/device/ab",
            headers: [HTTP2Header("apns-topic", "com.example"), HTTP2Header("apns-id", "x", isIndexable: false)],
            body: [1, 2])
        #expect(request.method == "POST")
        #expect(request.scheme == "https")
        #expect(request.authority == "api.push.apple.com")
        #expect(request.path == "/3/device/ab")
        #expect(request.isPathIndexable)
        #expect(
            request.headers == [
                HTTP2Header("apns-topic", "com.example"),
                HTTP2Header("apns-id", "x", isIndexable: false),
            ])
        #expect(request.body == [1, 2])
        #expect(request.hasSchemeAndAuthority)
    }

    @Test func headerNamesArePackedLowercaseAsHTTP2SendsThem() {
        let request = HTTP2Request(
            path: "/p", headers: [HTTP2Header("Apns-Topic", "Com.Example"), HTTP2Header("X-ID-9", "V")])
        #expect(request.headers == [HTTP2Header("apns-topic", "Com.Example"), HTTP2Header("x-id-9", "V")])
    }

    @Test func settingOnePropertyLeavesTheOthersAsTheyWere() {
        var request = HTTP2Request(
            path: "/a",
            headers: [HTTP2Header("k", "v"), HTTP2Header("n", "1", isIndexable: false)])
        #expect(!request.hasSchemeAndAuthority)
        request.scheme = "https"
        request.authority = "127.0.0.1:8443"
        request.path = "/a/much/longer/path"
        request.isPathIndexable = false
        request.method = "GET"
        #expect(request.hasSchemeAndAuthority)
        #expect(request.method == "GET")
        #expect(request.scheme == "https")
        #expect(request.authority == "127.0.0.1:8443")
        #expect(request.path == "/a/much/longer/path")
        #expect(!request.isPathIndexable)
        #expect(request.headers == [HTTP2Header("k", "v"), HTTP2Header("n", "1", isIndexable: false)])

        request.headers = [HTTP2Header("only", "één")]
        #expect(request.headers == [HTTP2Header("only", "één")])
        #expect(request.path == "/a/much/longer/path" && !request.isPathIndexable && request.method == "GET")
    }

    @Test func theFieldsGoToNghttp2InSendingOrderWithTheirFlags() {
        let request = HTTP2Request(
            method: "POST", scheme: "https", authority: "h", path: "/p",
            headers: [HTTP2Header("a", "1"), HTTP2Header("b", "22", isIndexable: false)])
        var seen: [String] = []
        request.fields.withUnsafeBytes { bytes in
            PackedHeaderList.forEachField(in: bytes) { field in
                let name = String(decoding: bytes[field.nameStart..<field.nameStart + field.nameCount], as: UTF8.self)
                let value = String(
                    decoding: bytes[field.valueStart..<field.valueStart + field.valueCount],
                    as: UTF8.self)
                seen.append("\(name)=\(value)\(field.isIndexable ? "" : " (never indexed)")")
            }
        }
        #expect(seen == [":method=POST", ":scheme=https", ":authority=h", ":path=/p", "a=1", "b=22 (never indexed)"])
    }
}
