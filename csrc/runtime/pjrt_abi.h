// The subset of the PJRT C ABI that TorchTPU calls, declared by us.
//
// The layout follows the public PJRT C API (openxla/xla, xla/pjrt/c/pjrt_c_api.h), version 0.x.
// Only the argument structs we fill are spelled out; the function table lists every slot up to
// the last one we call, because a slot's position is its identity. Every argument struct starts
// with struct_size, which we set to our own size so a newer plugin knows which fields we have.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

// The API version these declarations were written against. A plugin whose major version differs
// is refused; a plugin with a lower minor version than kMinPjrtMinor is refused too, because the
// fields we use may be missing.
constexpr int kPjrtMajor = 0;
constexpr int kMinPjrtMinor = 40;

struct PJRT_Error;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_DeviceDescription;
struct PJRT_Memory;
struct PJRT_Event;
struct PJRT_Buffer;
struct PJRT_Executable;
struct PJRT_LoadedExecutable;
struct PJRT_SerializedExecutable;
struct PJRT_ExecuteContext;
struct PJRT_Buffer_MemoryLayout;

struct PJRT_Extension_Base {
  size_t struct_size;
  int type;
  PJRT_Extension_Base* next;
};

#define TPU_PJRT_HEADER     \
  size_t struct_size;       \
  PJRT_Extension_Base* extension_start

enum PJRT_Error_Code {
  PJRT_Error_Code_OK = 0,
  PJRT_Error_Code_INVALID_ARGUMENT = 3,
  PJRT_Error_Code_NOT_FOUND = 5,
  PJRT_Error_Code_RESOURCE_EXHAUSTED = 8,
  PJRT_Error_Code_UNIMPLEMENTED = 12,
};

enum PJRT_Buffer_Type {
  PJRT_Buffer_Type_INVALID = 0,
  PJRT_Buffer_Type_PRED,
  PJRT_Buffer_Type_S8,
  PJRT_Buffer_Type_S16,
  PJRT_Buffer_Type_S32,
  PJRT_Buffer_Type_S64,
  PJRT_Buffer_Type_U8,
  PJRT_Buffer_Type_U16,
  PJRT_Buffer_Type_U32,
  PJRT_Buffer_Type_U64,
  PJRT_Buffer_Type_F16,
  PJRT_Buffer_Type_F32,
  PJRT_Buffer_Type_F64,
  PJRT_Buffer_Type_BF16,
  PJRT_Buffer_Type_C64,
  PJRT_Buffer_Type_C128,
};

enum PJRT_HostBufferSemantics {
  PJRT_HostBufferSemantics_kImmutableOnlyDuringCall = 0,
  PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes,
  PJRT_HostBufferSemantics_kImmutableZeroCopy,
  PJRT_HostBufferSemantics_kMutableZeroCopy,
};

enum PJRT_NamedValue_Type {
  PJRT_NamedValue_kString = 0,
  PJRT_NamedValue_kInt64,
  PJRT_NamedValue_kInt64List,
  PJRT_NamedValue_kFloat,
  PJRT_NamedValue_kBool,
};

struct PJRT_NamedValue {
  TPU_PJRT_HEADER;
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;
};

struct PJRT_Api_Version {
  TPU_PJRT_HEADER;
  int major_version;
  int minor_version;
};

struct PJRT_Error_Destroy_Args { TPU_PJRT_HEADER; PJRT_Error* error; };
struct PJRT_Error_Message_Args {
  TPU_PJRT_HEADER;
  const PJRT_Error* error;
  const char* message;
  size_t message_size;
};
struct PJRT_Error_GetCode_Args { TPU_PJRT_HEADER; const PJRT_Error* error; PJRT_Error_Code code; };
struct PJRT_Plugin_Initialize_Args { TPU_PJRT_HEADER; };
struct PJRT_Plugin_Attributes_Args {
  TPU_PJRT_HEADER;
  const PJRT_NamedValue* attributes;
  size_t num_attributes;
};

struct PJRT_Event_Destroy_Args { TPU_PJRT_HEADER; PJRT_Event* event; };
struct PJRT_Event_IsReady_Args { TPU_PJRT_HEADER; PJRT_Event* event; bool is_ready; };
struct PJRT_Event_Error_Args { TPU_PJRT_HEADER; PJRT_Event* event; };
struct PJRT_Event_Await_Args { TPU_PJRT_HEADER; PJRT_Event* event; };
struct PJRT_Event_OnReady_Args {
  TPU_PJRT_HEADER;
  PJRT_Event* event;
  void (*callback)(PJRT_Error* error, void* user_arg);
  void* user_arg;
};

struct PJRT_Client_Create_Args {
  TPU_PJRT_HEADER;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  void* kv_get_callback;
  void* kv_get_user_arg;
  void* kv_put_callback;
  void* kv_put_user_arg;
  PJRT_Client* client;
  void* kv_try_get_callback;
  void* kv_try_get_user_arg;
};
struct PJRT_Client_Destroy_Args { TPU_PJRT_HEADER; PJRT_Client* client; };
struct PJRT_Client_PlatformName_Args {
  TPU_PJRT_HEADER;
  PJRT_Client* client;
  const char* platform_name;
  size_t platform_name_size;
};
struct PJRT_Client_PlatformVersion_Args {
  TPU_PJRT_HEADER;
  PJRT_Client* client;
  const char* platform_version;
  size_t platform_version_size;
};
struct PJRT_Client_AddressableDevices_Args {
  TPU_PJRT_HEADER;
  PJRT_Client* client;
  PJRT_Device* const* addressable_devices;
  size_t num_addressable_devices;
};
struct PJRT_Program {
  TPU_PJRT_HEADER;
  char* code;
  size_t code_size;
  const char* format;
  size_t format_size;
};
struct PJRT_Client_Compile_Args {
  TPU_PJRT_HEADER;
  PJRT_Client* client;
  const PJRT_Program* program;
  const char* compile_options;
  size_t compile_options_size;
  PJRT_LoadedExecutable* executable;
};
struct PJRT_Client_BufferFromHostBuffer_Args {
  TPU_PJRT_HEADER;
  PJRT_Client* client;
  const void* data;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  const int64_t* byte_strides;
  size_t num_byte_strides;
  PJRT_HostBufferSemantics host_buffer_semantics;
  PJRT_Device* device;
  PJRT_Memory* memory;
  PJRT_Buffer_MemoryLayout* device_layout;
  PJRT_Event* done_with_host_buffer;
  PJRT_Buffer* buffer;
};

struct PJRT_DeviceDescription_Id_Args {
  TPU_PJRT_HEADER;
  PJRT_DeviceDescription* device_description;
  int id;
};
struct PJRT_DeviceDescription_Kind_Args {
  TPU_PJRT_HEADER;
  PJRT_DeviceDescription* device_description;
  const char* device_kind;
  size_t device_kind_size;
};
// Each optional statistic is followed by whether the plugin set it.
struct PJRT_Device_MemoryStats_Args {
  TPU_PJRT_HEADER;
  PJRT_Device* device;
  int64_t bytes_in_use;
  int64_t peak_bytes_in_use; bool peak_bytes_in_use_is_set;
  int64_t num_allocs; bool num_allocs_is_set;
  int64_t largest_alloc_size; bool largest_alloc_size_is_set;
  int64_t bytes_limit; bool bytes_limit_is_set;
  int64_t bytes_reserved; bool bytes_reserved_is_set;
  int64_t peak_bytes_reserved; bool peak_bytes_reserved_is_set;
  int64_t bytes_reservable_limit; bool bytes_reservable_limit_is_set;
  int64_t largest_free_block_bytes; bool largest_free_block_bytes_is_set;
  int64_t pool_bytes; bool pool_bytes_is_set;
  int64_t peak_pool_bytes; bool peak_pool_bytes_is_set;
  int64_t peak_allocated_bytes; bool peak_allocated_bytes_is_set;
};

struct PJRT_Device_GetDescription_Args {
  TPU_PJRT_HEADER;
  PJRT_Device* device;
  PJRT_DeviceDescription* device_description;
};

struct PJRT_Executable_Destroy_Args { TPU_PJRT_HEADER; PJRT_Executable* executable; };
struct PJRT_Executable_NumOutputs_Args {
  TPU_PJRT_HEADER;
  PJRT_Executable* executable;
  size_t num_outputs;
};
struct PJRT_Executable_Serialize_Args {
  TPU_PJRT_HEADER;
  const PJRT_Executable* executable;
  const char* serialized_bytes;
  size_t serialized_bytes_size;
  PJRT_SerializedExecutable* serialized_executable;
  void (*serialized_executable_deleter)(PJRT_SerializedExecutable* exec);
};
struct PJRT_LoadedExecutable_Destroy_Args { TPU_PJRT_HEADER; PJRT_LoadedExecutable* executable; };
struct PJRT_LoadedExecutable_GetExecutable_Args {
  TPU_PJRT_HEADER;
  PJRT_LoadedExecutable* loaded_executable;
  PJRT_Executable* executable;
};
struct PJRT_ExecuteOptions {
  TPU_PJRT_HEADER;
  void** send_callbacks;
  void** recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  const int64_t* non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
  PJRT_ExecuteContext* context;
  // Newer plugins insist on the full size of this struct, so the trailing fields are declared.
  const char* call_location;
  size_t num_tasks;
  int* task_ids;
  int64_t* incarnation_ids;
};
struct PJRT_LoadedExecutable_Execute_Args {
  TPU_PJRT_HEADER;
  PJRT_LoadedExecutable* executable;
  PJRT_ExecuteOptions* options;
  PJRT_Buffer* const* const* argument_lists;
  size_t num_devices;
  size_t num_args;
  PJRT_Buffer** const* output_lists;
  PJRT_Event** device_complete_events;
  PJRT_Device* execute_device;
};
struct PJRT_Executable_DeserializeAndLoad_Args {
  TPU_PJRT_HEADER;
  PJRT_Client* client;
  const char* serialized_executable;
  size_t serialized_executable_size;
  PJRT_LoadedExecutable* loaded_executable;
  // Null keeps the compile options stored in the serialized executable.
  const char* overridden_serialized_compile_options;
  size_t overridden_serialized_compile_options_size;
};

struct PJRT_Buffer_Destroy_Args { TPU_PJRT_HEADER; PJRT_Buffer* buffer; };
struct PJRT_Buffer_IsDeleted_Args { TPU_PJRT_HEADER; PJRT_Buffer* buffer; bool is_deleted; };
struct PJRT_Buffer_OnDeviceSizeInBytes_Args {
  TPU_PJRT_HEADER;
  PJRT_Buffer* buffer;
  size_t on_device_size_in_bytes;
};
struct PJRT_Buffer_CopyToDevice_Args {
  TPU_PJRT_HEADER;
  PJRT_Buffer* buffer;
  PJRT_Device* dst_device;
  PJRT_Buffer* dst_buffer;
};
struct PJRT_Buffer_ToHostBuffer_Args {
  TPU_PJRT_HEADER;
  PJRT_Buffer* src;
  PJRT_Buffer_MemoryLayout* host_layout;
  void* dst;
  size_t dst_size;
  PJRT_Event* event;
};
struct PJRT_Buffer_ReadyEvent_Args { TPU_PJRT_HEADER; PJRT_Buffer* buffer; PJRT_Event* event; };

#undef TPU_PJRT_HEADER

typedef void PJRT_VoidFn();
using PJRT_Fn = PJRT_Error* (*)(void* args);

// The function table. Slots we never call are typed as opaque pointers; their order matters.
struct PJRT_Api {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Api_Version pjrt_api_version;

  void (*PJRT_Error_Destroy)(PJRT_Error_Destroy_Args*);
  void (*PJRT_Error_Message)(PJRT_Error_Message_Args*);
  PJRT_Error* (*PJRT_Error_GetCode)(PJRT_Error_GetCode_Args*);

  PJRT_Error* (*PJRT_Plugin_Initialize)(PJRT_Plugin_Initialize_Args*);
  PJRT_Error* (*PJRT_Plugin_Attributes)(PJRT_Plugin_Attributes_Args*);

  PJRT_Error* (*PJRT_Event_Destroy)(PJRT_Event_Destroy_Args*);
  PJRT_Error* (*PJRT_Event_IsReady)(PJRT_Event_IsReady_Args*);
  PJRT_Error* (*PJRT_Event_Error)(PJRT_Event_Error_Args*);
  PJRT_Error* (*PJRT_Event_Await)(PJRT_Event_Await_Args*);
  PJRT_Error* (*PJRT_Event_OnReady)(PJRT_Event_OnReady_Args*);

  PJRT_Error* (*PJRT_Client_Create)(PJRT_Client_Create_Args*);
  PJRT_Error* (*PJRT_Client_Destroy)(PJRT_Client_Destroy_Args*);
  PJRT_Error* (*PJRT_Client_PlatformName)(PJRT_Client_PlatformName_Args*);
  void* PJRT_Client_ProcessIndex;
  PJRT_Error* (*PJRT_Client_PlatformVersion)(PJRT_Client_PlatformVersion_Args*);
  void* PJRT_Client_Devices;
  PJRT_Error* (*PJRT_Client_AddressableDevices)(PJRT_Client_AddressableDevices_Args*);
  void* PJRT_Client_LookupDevice;
  void* PJRT_Client_LookupAddressableDevice;
  void* PJRT_Client_AddressableMemories;
  PJRT_Error* (*PJRT_Client_Compile)(PJRT_Client_Compile_Args*);
  void* PJRT_Client_DefaultDeviceAssignment;
  PJRT_Error* (*PJRT_Client_BufferFromHostBuffer)(PJRT_Client_BufferFromHostBuffer_Args*);

  PJRT_Error* (*PJRT_DeviceDescription_Id)(PJRT_DeviceDescription_Id_Args*);
  void* PJRT_DeviceDescription_ProcessIndex;
  void* PJRT_DeviceDescription_Attributes;
  PJRT_Error* (*PJRT_DeviceDescription_Kind)(PJRT_DeviceDescription_Kind_Args*);
  void* PJRT_DeviceDescription_DebugString;
  void* PJRT_DeviceDescription_ToString;

  PJRT_Error* (*PJRT_Device_GetDescription)(PJRT_Device_GetDescription_Args*);
  void* PJRT_Device_IsAddressable;
  void* PJRT_Device_LocalHardwareId;
  void* PJRT_Device_AddressableMemories;
  void* PJRT_Device_DefaultMemory;
  PJRT_Error* (*PJRT_Device_MemoryStats)(PJRT_Device_MemoryStats_Args*);

  void* PJRT_Memory_Id;
  void* PJRT_Memory_Kind;
  void* PJRT_Memory_DebugString;
  void* PJRT_Memory_ToString;
  void* PJRT_Memory_AddressableByDevices;

  PJRT_Error* (*PJRT_Executable_Destroy)(PJRT_Executable_Destroy_Args*);
  void* PJRT_Executable_Name;
  void* PJRT_Executable_NumReplicas;
  void* PJRT_Executable_NumPartitions;
  PJRT_Error* (*PJRT_Executable_NumOutputs)(PJRT_Executable_NumOutputs_Args*);
  void* PJRT_Executable_SizeOfGeneratedCodeInBytes;
  void* PJRT_Executable_GetCostAnalysis;
  void* PJRT_Executable_OutputMemoryKinds;
  void* PJRT_Executable_OptimizedProgram;
  PJRT_Error* (*PJRT_Executable_Serialize)(PJRT_Executable_Serialize_Args*);

  PJRT_Error* (*PJRT_LoadedExecutable_Destroy)(PJRT_LoadedExecutable_Destroy_Args*);
  PJRT_Error* (*PJRT_LoadedExecutable_GetExecutable)(PJRT_LoadedExecutable_GetExecutable_Args*);
  void* PJRT_LoadedExecutable_AddressableDevices;
  void* PJRT_LoadedExecutable_Delete;
  void* PJRT_LoadedExecutable_IsDeleted;
  PJRT_Error* (*PJRT_LoadedExecutable_Execute)(PJRT_LoadedExecutable_Execute_Args*);
  PJRT_Error* (*PJRT_Executable_DeserializeAndLoad)(PJRT_Executable_DeserializeAndLoad_Args*);
  void* PJRT_LoadedExecutable_Fingerprint;

  PJRT_Error* (*PJRT_Buffer_Destroy)(PJRT_Buffer_Destroy_Args*);
  void* PJRT_Buffer_ElementType;
  void* PJRT_Buffer_Dimensions;
  void* PJRT_Buffer_UnpaddedDimensions;
  void* PJRT_Buffer_DynamicDimensionIndices;
  void* PJRT_Buffer_GetMemoryLayout;
  PJRT_Error* (*PJRT_Buffer_OnDeviceSizeInBytes)(PJRT_Buffer_OnDeviceSizeInBytes_Args*);
  void* PJRT_Buffer_Device;
  void* PJRT_Buffer_Memory;
  void* PJRT_Buffer_Delete;
  PJRT_Error* (*PJRT_Buffer_IsDeleted)(PJRT_Buffer_IsDeleted_Args*);
  PJRT_Error* (*PJRT_Buffer_CopyToDevice)(PJRT_Buffer_CopyToDevice_Args*);
  PJRT_Error* (*PJRT_Buffer_ToHostBuffer)(PJRT_Buffer_ToHostBuffer_Args*);
  void* PJRT_Buffer_IsOnCpu;
  PJRT_Error* (*PJRT_Buffer_ReadyEvent)(PJRT_Buffer_ReadyEvent_Args*);
};

using GetPjrtApiFn = const PJRT_Api* (*)();

}  // extern "C"
