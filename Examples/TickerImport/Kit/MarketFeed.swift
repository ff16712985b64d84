import Foundation

/// A simulated market: companies with random-walk prices, deterministic for a seed.
struct MarketFeed {
    struct Listing: Sendable {
        var symbol: String
        var name: String
        var sector: String
        var openingPrice: Double
    }

    struct Quote: Sendable {
        var listing: Int
        var price: Double
        var volume: Int64
        /// The company's new name, when the quote comes with a rename (``renameInterval``); nil otherwise.
        var rename: String?
    }

    private(set) var listings: [Listing] = []
    private var prices: [Double] = []
    private var random: SplitMix64
    /// Draws the renames, apart from `random`, so that a seed's prices and
    /// volumes are what they were before the feed renamed anything.
    private var renames: SplitMix64

    init(seed: UInt64, tickers: Int) {
        var names = SplitMix64(seed: seed)
        var used = Set<String>()
        while listings.count < tickers {
            let length = 3 + Int(names.next() % 2)
            let symbol = String((0..<length).map { _ in Character(UnicodeScalar(UInt8(65 + names.next() % 26))) })
            guard used.insert(symbol).inserted else { continue }
            let price = 5 + Double(names.next() % 49_500) / 100
            let suffix = Int(names.next() % UInt64(Self.suffixes.count))
            listings.append(Listing(symbol: symbol, name: "\(symbol.capitalized) \(Self.suffixes[suffix].name)",
                                    sector: Self.suffixes[suffix].sector, openingPrice: price))
        }
        prices = listings.map(\.openingPrice)
        random = SplitMix64(seed: seed &* 0x9E37_79B9_7F4A_7C15 &+ 1)
        renames = SplitMix64(seed: seed &* 0xD1B5_4A32_D192_ED03 &+ 2)
    }

    private static let suffixes: [(name: String, sector: String)] = [
        ("Corp", "Industrials"), ("Inc", "Consumer"), ("Holdings", "Financials"), ("Group", "Financials"),
        ("Systems", "Technology"), ("Labs", "Health Care"), ("Energy", "Energy"), ("Foods", "Consumer"),
    ]

    /// About one quote in this many renames its company: `--search` then
    /// shows companies entering and leaving its results as the import runs.
    static let renameInterval: UInt64 = 250

    /// Brands a renamed company takes, in front of its listed name ("Acme Todf Labs").
    private static let brands = ["Acme", "Globex", "Global", "Initech", "Umbrella", "Hooli", "Stark", "Wonka"]

    /// The next quotes: a random listing moves by up to ±2%; now and then
    /// (one quote in ``renameInterval``) it is renamed as well: a brand in front
    /// of its listed name, or, one rename in five, back to the listed name.
    mutating func next(_ count: Int) -> [Quote] {
        (0..<count).map { _ in
            let index = Int(random.next() % UInt64(listings.count))
            let move = (Double(random.next() % 4_001) - 2_000) / 100_000
            prices[index] = max(0.01, (prices[index] * (1 + move) * 100).rounded() / 100)
            var quote = Quote(listing: index, price: prices[index], volume: Int64(100 + random.next() % 10_000))
            if renames.next() % Self.renameInterval == 0 {
                let brand = renames.next() % UInt64(Self.brands.count + Self.brands.count / 4)
                quote.rename = brand < Self.brands.count ? "\(Self.brands[Int(brand)]) \(listings[index].name)" : listings[index].name
            }
            return quote
        }
    }
}

/// A small, fast, seedable generator (SplitMix64), so a seed replays the same market.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
