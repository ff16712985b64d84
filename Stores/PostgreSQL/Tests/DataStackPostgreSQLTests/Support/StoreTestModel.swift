import Foundation
import ObjectGraph

/// A model with an attribute of each type, a to-one/to-many pair, a
/// many-to-many pair, an abstract-free inheritance tree and a uniqueness
/// constraint: what a store must lay out and read back.
enum StoreTestModel {
    static func make() -> ManagedObjectModel {
        let company = EntityDescription(name: "Company", properties: [
            AttributeDescription(name: "symbol", type: .string, isOptional: false),
            AttributeDescription(name: "name", type: .string),
            AttributeDescription(name: "employees", type: .integer32, isOptional: false, defaultValue: .integer(0)),
            AttributeDescription(name: "revenue", type: .double),
            AttributeDescription(name: "founded", type: .date),
            AttributeDescription(name: "active", type: .boolean, isOptional: false, defaultValue: .bool(true)),
            AttributeDescription(name: "logo", type: .binaryData),
            AttributeDescription(name: "identifier", type: .uuid),
            AttributeDescription(name: "website", type: .uri),
            RelationshipDescription(name: "updates", destination: "StockUpdate", inverse: "company", isToMany: true, deleteRule: .cascade),
            RelationshipDescription(name: "indexes", destination: "MarketIndex", inverse: "members", isToMany: true, deleteRule: .nullify),
        ])
        company.uniquenessConstraints = [["symbol"]]
        let update = EntityDescription(name: "StockUpdate", properties: [
            AttributeDescription(name: "price", type: .double, isOptional: false, defaultValue: .double(0)),
            AttributeDescription(name: "volume", type: .integer64, isOptional: false, defaultValue: .integer(0)),
            RelationshipDescription(name: "company", destination: "Company", inverse: "updates", deleteRule: .nullify),
        ])
        let index = EntityDescription(name: "MarketIndex", properties: [
            AttributeDescription(name: "name", type: .string, isOptional: false),
            RelationshipDescription(name: "members", destination: "Company", inverse: "indexes", isToMany: true, deleteRule: .nullify),
        ])
        let sectorIndex = EntityDescription(name: "SectorIndex", properties: [
            AttributeDescription(name: "sector", type: .string),
        ])
        index.subentities = [sectorIndex]
        return ManagedObjectModel(entities: [company, update, index, sectorIndex])
    }
}
