import Foundation
import ObjectGraph

/// One company row, the same for every contender.
struct CompanyValues: Sendable {
    var symbol: String
    var name: String
    var employees: Int
    var founded: Date
    var price: Double

    /// `count` deterministic rows.
    static func rows(_ count: Int) -> [CompanyValues] {
        (0..<count).map { index in
            CompanyValues(symbol: "S\(index)", name: "Company number \(index)", employees: (index * 7_919) % 250_000,
                          founded: Date(timeIntervalSinceReferenceDate: Double(index) * 3_600.25),
                          price: Double(index % 100_000) / 100 + 0.5)
        }
    }
}

/// The model of every DataStack contender, built in code: one `Company` entity.
enum CompanyModel {
    static let entityName = "Company"

    static func make() -> ManagedObjectModel {
        let company = EntityDescription(name: entityName, properties: [
            AttributeDescription(name: "symbol", type: .string, isOptional: false),
            AttributeDescription(name: "name", type: .string),
            AttributeDescription(name: "employees", type: .integer64, isOptional: false, defaultValue: .integer(0)),
            AttributeDescription(name: "founded", type: .date),
            AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
        ])
        return ManagedObjectModel(entities: [company])
    }
}

/// What a read saw, summed, so every contender's reads can be compared.
struct Checksum: Equatable, CustomStringConvertible {
    var rows = 0
    var characters = 0
    var employees = 0
    var founded = 0.0
    var price = 0.0

    mutating func add(symbol: String, name: String?, employees: Int, founded: Date?, price: Double) {
        rows += 1
        characters += symbol.utf8.count + (name?.utf8.count ?? 0)
        self.employees &+= employees
        self.founded += founded?.timeIntervalSinceReferenceDate ?? 0
        self.price += price
    }

    /// Equal counts and sums, the floating-point sums up to rounding.
    func matches(_ other: Checksum) -> Bool {
        func close(_ a: Double, _ b: Double) -> Bool { abs(a - b) <= 1e-9 * max(1, abs(b)) }
        return rows == other.rows && characters == other.characters && employees == other.employees
            && close(founded, other.founded) && close(price, other.price)
    }

    var description: String {
        "\(rows) rows, \(characters) characters, employees \(employees), founded \(founded), price \(price)"
    }
}
