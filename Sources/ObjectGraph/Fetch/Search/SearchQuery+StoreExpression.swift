/// A ``SearchQuery`` as a store that searches with its own machinery (not
/// SQLite's FTS5) needs it: the tree of terms, each already tokenized.
///
/// The PostgreSQL store builds its `tsquery`s and relevance from it, and
/// indexes texts with ``SearchQuery/tokens(in:)``, so it finds and ranks what
/// the SQLite store and ``SearchQuery/matches(_:)`` find and rank.
@_spi(StoreImplementation)
public indirect enum SearchExpression: Sendable, Hashable {
    /// A word or phrase: its tokens must appear one after the other in one attribute.
    case term(SearchTerm)
    /// Every operand matches.
    case and([SearchExpression])
    /// Some operand matches.
    case or([SearchExpression])
    /// The left side matches and the right side does not.
    case not(SearchExpression, SearchExpression)
}

/// One word or phrase of a ``SearchExpression``.
@_spi(StoreImplementation)
public struct SearchTerm: Sendable, Hashable {
    /// Its position among the query's terms, left to right, from 0.
    public let index: Int
    /// Its folded tokens, as ``SearchQuery/tokens(in:)`` gives them (never empty).
    public let tokens: [String]
    /// Whether the last token matches any token it starts (`appl*`).
    public let isPrefix: Bool
    /// Whether it counts toward relevance: not inside the right side of a NOT
    /// (the terms ``SearchQuery/relevance(of:)`` sums over, once per appearance).
    public let isPositive: Bool
}

@_spi(StoreImplementation)
extension SearchQuery {
    /// The query's tree, with its terms numbered left to right.
    public var storeExpression: SearchExpression {
        var next = 0
        func convert(_ node: SearchNode, positive: Bool) -> SearchExpression {
            switch node {
            case .atom(let atom):
                defer { next += 1 }
                return .term(SearchTerm(index: next, tokens: atom.tokens, isPrefix: atom.isPrefix, isPositive: positive))
            case .and(let operands): return .and(operands.map { convert($0, positive: positive) })
            case .or(let operands): return .or(operands.map { convert($0, positive: positive) })
            case .not(let lhs, let rhs):
                let left = convert(lhs, positive: positive)
                return .not(left, convert(rhs, positive: false))
            }
        }
        return convert(root, positive: true)
    }

    /// The folded tokens of a text, as the SQLite store's full-text index holds
    /// them and as queries compare them, byte for byte (``SearchTokenizer``).
    public static func tokens(in text: String) -> [String] {
        SearchTokenizer.foldedTokens(in: text)
    }

    /// The most bytes of a token the SQLite store's index compares: longer
    /// tokens that share their first 32,768 bytes are the same token.
    public static var maximumComparedTokenBytes: Int { SearchAtom.maximumTokenBytes }
}

extension SearchExpression {
    /// The terms, left to right.
    @_spi(StoreImplementation)
    public var terms: [SearchTerm] {
        switch self {
        case .term(let term): [term]
        case .and(let operands), .or(let operands): operands.flatMap(\.terms)
        case .not(let lhs, let rhs): lhs.terms + rhs.terms
        }
    }
}
