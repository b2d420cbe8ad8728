/// One header field line: a name in its original case and an OWS-trimmed value.
public struct HTTPHeaderField: Hashable, Sendable {
    /// The field name as received (a token; compare case-insensitively).
    public var name: String
    /// The field value without leading and trailing whitespace.
    public var value: String

    /// Creates a field.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// The ordered header fields of a head, with case-insensitive lookup.
///
/// Order and name case are preserved exactly as received, so a head can be forwarded faithfully.
public struct HTTPHeaders: Hashable, Sendable, RandomAccessCollection, ExpressibleByDictionaryLiteral {
    /// The fields in order.
    public private(set) var fields: [HTTPHeaderField]
    /// Whether every field passed a head parser's checks (a token name, field-value bytes): set only by the
    /// parsers and cleared by `append`, so the serializers re-check the bytes of every other field before
    /// writing it, and skip that for these. Not part of equality.
    private(set) var parsed = false

    /// Creates headers from fields in order.
    public init(_ fields: [HTTPHeaderField] = []) {
        self.fields = fields
    }

    /// Creates headers from a parser's field list, taking its array and leaving `fields` empty without storage
    /// (so the parser, reset for the next head, does not copy an array it still shared).
    init(taking fields: inout [HTTPHeaderField]) {
        self.fields = []
        swap(&self.fields, &fields)
        self.parsed = true
    }

    /// Equal when the fields are, in order (whether they were parsed does not matter).
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool { lhs.fields == rhs.fields }

    public func hash(into hasher: inout Hasher) { hasher.combine(fields) }

    /// Takes the fields' array out, leaving the headers empty, so that it can be emptied in place (capacity
    /// kept) and handed to a later head's parser (`adoptStorage`), which then parses into it without
    /// allocating. Call it on the last copy of the headers: an array still shared elsewhere would be copied.
    public mutating func takeStorage() -> [HTTPHeaderField] {
        var taken: [HTTPHeaderField] = []
        swap(&taken, &self.fields)
        return taken
    }

    /// Creates headers from `["Name": "value", ...]` in literal order; repeated names are kept.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.fields = elements.map { HTTPHeaderField(name: $0.0, value: $0.1) }
    }

    /// The index of the first field.
    public var startIndex: Int { self.fields.startIndex }
    /// One past the index of the last field.
    public var endIndex: Int { self.fields.endIndex }
    /// The field at `position`.
    public subscript(position: Int) -> HTTPHeaderField { self.fields[position] }

    /// Appends a field at the end.
    public mutating func append(name: String, value: String) {
        self.fields.append(HTTPHeaderField(name: name, value: value))
        self.parsed = false
    }

    /// Removes every field with this name (case-insensitive).
    public mutating func removeAll(named name: String) {
        // Only a match mutates: the fields are often shared with a copy of the head, and removing nothing from a
        // shared array would still copy it. One pass: the kept fields after the first match slide down.
        guard let first = self.fields.firstIndex(where: { HTTPSyntax.equalsIgnoringCase($0.name, name) }) else {
            return
        }
        var kept = first
        for index in (first + 1)..<self.fields.count {
            guard !HTTPSyntax.equalsIgnoringCase(self.fields[index].name, name) else { continue }
            self.fields[kept] = self.fields[index]
            kept += 1
        }
        self.fields.removeSubrange(kept...)
    }

    /// The value of the first field with this name (case-insensitive), or nil.
    public func first(named name: String) -> String? {
        // Index loops read the fields in place: `for field in` would copy each (a retain and a release per string).
        for index in self.fields.indices where HTTPSyntax.equalsIgnoringCase(self.fields[index].name, name) {
            return self.fields[index].value
        }
        return nil
    }

    /// The values of every field with this name (case-insensitive), in order.
    public func values(named name: String) -> [String] {
        var values: [String] = []
        for index in self.fields.indices where HTTPSyntax.equalsIgnoringCase(self.fields[index].name, name) {
            values.append(self.fields[index].value)
        }
        return values
    }

    /// Whether a field with this name (case-insensitive) is present.
    public func contains(named name: String) -> Bool {
        for index in self.fields.indices where HTTPSyntax.equalsIgnoringCase(self.fields[index].name, name) {
            return true
        }
        return false
    }

    /// The lowercased, non-empty tokens of every Connection field (`close`, `keep-alive`, field names...).
    public var connectionTokens: [String] {
        self.values(named: "connection").flatMap { value in
            HTTPSyntax.listElements(value).filter { !$0.isEmpty }.map { $0.lowercased() }
        }
    }

    /// Whether `connectionTokens` contains `token.lowercased()`, found without building the array.
    func connectionNames(_ token: some StringProtocol) -> Bool {
        for index in self.fields.indices
        where HTTPSyntax.equalsIgnoringCase(self.fields[index].name, lowercase: "connection") {
            let found = HTTPSyntax.firstListElement(self.fields[index].value) { element in
                !element.isEmpty && HTTPSyntax.equalsLowercased(element, token)
            }
            if found {
                return true
            }
        }
        return false
    }
}
