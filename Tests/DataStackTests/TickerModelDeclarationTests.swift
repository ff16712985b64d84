import DataStack
import Foundation
import Testing
@testable import TickerImportKit

/// ticker-import declares its model once, by its classes: the model they give
/// is the one its `.xcdatamodeld` has as `TickerModel 2` (`--model-file`),
/// property by property, so a store either made opens with the other unmigrated.
@Suite struct TickerModelDeclarationTests {
    @Test func theClassesDeclareTheModelFilesCurrentVersion() throws {
        let declared = try ManagedObjectModel(classes: TickerModel.classes)
        let file = try TickerStoreModel.version("TickerModel 2")
        #expect(declared.entityVersionHashesByName == file.entityVersionHashesByName)
        #expect(Set(declared.entitiesByName.keys) == ["Company", "StockUpdate"])
        for (name, fileEntity) in file.entitiesByName {
            let entity = try #require(declared.entitiesByName[name])
            #expect(entity.uniquenessConstraints == fileEntity.uniquenessConstraints, "\(name)")
            #expect(entity.indexes.map(\.name) == fileEntity.indexes.map(\.name), "\(name)")
            #expect(entity.indexes.map(\.propertyNames) == fileEntity.indexes.map(\.propertyNames), "\(name)")
            #expect(Set(entity.propertiesByName.keys) == Set(fileEntity.propertiesByName.keys), "\(name)")
            for (key, fileProperty) in fileEntity.propertiesByName {
                let property = try #require(entity.propertiesByName[key])
                #expect(property.versionHash == fileProperty.versionHash, "\(name).\(key)")
                #expect(property.isIndexedBySpotlight == fileProperty.isIndexedBySpotlight, "\(name).\(key)")
                if let attribute = property as? AttributeDescription, let fileAttribute = fileProperty as? AttributeDescription {
                    #expect(attribute.defaultValue == fileAttribute.defaultValue, "\(name).\(key)")
                }
                if let relationship = property as? RelationshipDescription,
                   let fileRelationship = fileProperty as? RelationshipDescription {
                    #expect(relationship.inverseName == fileRelationship.inverseName, "\(name).\(key)")
                    #expect(relationship.deleteRule == fileRelationship.deleteRule, "\(name).\(key)")
                }
            }
        }
        #expect(declared.entitiesByName["Company"]?.managedObjectClass == Company.self)
        #expect(declared.entitiesByName["StockUpdate"]?.managedObjectClass == StockUpdate.self)
    }
}
