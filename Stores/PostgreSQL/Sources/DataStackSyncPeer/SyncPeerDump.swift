import DataStack
import Foundation

/// Every object of a replica as ``SyncPeerOutput/Object`` lines, sorted by
/// entity and key: what the test compares across replicas. Read through a
/// fresh context, so it is what the store holds.
enum SyncPeerDump {
    static func objects(of stack: StackManager) throws -> [SyncPeerOutput.Object] {
        let context = stack.importerContext()
        return try context.performAndWait {
            var objects: [SyncPeerOutput.Object] = []
            for entity in SyncPeerModel.entityNames {
                for object in try SyncPeerEditor.objects(entity, in: context) {
                    var line = SyncPeerOutput.Object(entity: entity, key: try SyncPeerEditor.key(of: object), values: [:], members: [:])
                    for (name, property) in object.entity.propertiesByName where name != "key" {
                        if let relationship = property as? RelationshipDescription {
                            if relationship.isToMany {
                                line.members[name] = try SyncPeerEditor.members(object, name).map(SyncPeerEditor.key(of:))
                            } else if let destination = try object.value(forKey: name) as? ManagedObject {
                                line.values[name] = try SyncPeerEditor.key(of: destination)
                            }
                        } else if let value = try object.value(forKey: name) {
                            line.values[name] = "\(value)"
                        }
                    }
                    objects.append(line)
                }
            }
            return objects
        }
    }
}
