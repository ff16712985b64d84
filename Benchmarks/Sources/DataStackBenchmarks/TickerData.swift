import DataStack
import Foundation

/// One row of the benchmark's data, the same for every contender.
struct TickerValues: Sendable {
    var symbol: String
    var name: String
    var price: Double
    var volume: Int64
    var time: Date

    /// The row numbered `index` (deterministic, so every contender writes the same bytes).
    init(index: Int) {
        symbol = "T\(index)"
        name = "Ticker company number \(index)"
        price = Double(index % 10_000) / 4 + 1
        volume = Int64(index) * 37
        time = Date(timeIntervalSinceReferenceDate: 700_000_000 + Double(index))
    }

    /// Rows `0..<count`.
    static func rows(_ count: Int) -> [TickerValues] {
        (0..<count).map(TickerValues.init(index:))
    }
}

/// What a contender read back, folded into a few numbers, so that no read is
/// optimised away and the contenders can be checked against each other.
struct Checksum: Equatable, Sendable {
    var rows = 0
    var characters = 0
    var volume: Int64 = 0
    var price = 0.0
    var time = 0.0

    mutating func add(symbol: String, name: String, price: Double, volume: Int64, time: Date) {
        rows += 1
        characters &+= symbol.utf8.count &+ name.utf8.count
        self.volume &+= volume
        self.price += price
        self.time += time.timeIntervalSinceReferenceDate
    }
}

/// The DataStack subclass for the ticker entity.
final class BenchTicker: ManagedObject {
    @Managed var symbol: String
    @Managed var name: String
    @Managed var price: Double
    @Managed var volume: Int64
    @Managed var time: Date

    func assign(_ values: TickerValues) {
        symbol = values.symbol
        name = values.name
        price = values.price
        volume = values.volume
        time = values.time
    }
}

enum BenchModel {
    static let entityName = "BenchTicker"

    /// The ticker model; with `uniqueSymbols`, `symbol` is a uniqueness constraint (the upsert task).
    static func make(uniqueSymbols: Bool = false) -> ManagedObjectModel {
        let model = ManagedObjectModel(entities: [
            EntityDescription(name: entityName, managedObjectClass: BenchTicker.self, properties: [
                AttributeDescription(name: "symbol", type: .string, isOptional: false),
                AttributeDescription(name: "name", type: .string, isOptional: false),
                AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
                AttributeDescription(name: "volume", type: .integer64, isOptional: false, defaultValue: .integer(0)),
                AttributeDescription(name: "time", type: .date, isOptional: false,
                                     defaultValue: .date(Date(timeIntervalSinceReferenceDate: 0))),
            ]),
        ])
        if uniqueSymbols { model.entitiesByName[entityName]?.uniquenessConstraints = [["symbol"]] }
        return model
    }
}

/// A fresh temporary folder for one repetition, removed with its files.
final class ScratchDirectory: Sendable {
    let url: URL

    init(_ label: String) {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("datastack-bench-\(label)-\(UUID().uuidString)", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> URL { url.appendingPathComponent(name) }

    deinit { try? FileManager.default.removeItem(at: url) }
}
