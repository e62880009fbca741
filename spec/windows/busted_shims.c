/* The few C functions busted and penlight need from luafilesystem,
 * luasystem and lua-term, written for Windows with the Win32 API, so that
 * the Windows pass runs busted itself on a mingw-built lua.exe or
 * luajit.exe. One DLL exports all three openers; scripts/windows.sh
 * installs it as lfs.dll, system/core.dll and term/core.dll. It serves a
 * test runner, nothing else: attributes answer only what penlight asks. */
#include <windows.h>
#include <direct.h>
#include <io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

#ifndef LUA_FILEHANDLE
#define LUA_FILEHANDLE "FILE*"
#endif

#if LUA_VERSION_NUM == 501
#define new_lib(L, l) (lua_newtable(L), luaL_register(L, NULL, l))
#else
#define new_lib(L, l) luaL_newlib(L, l)
#endif

static int fail(lua_State *L, const char *what) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: error %d", what, (int)GetLastError());
    lua_pushinteger(L, (lua_Integer)GetLastError());
    return 3;
}

/* lfs.attributes(path [, name]): mode, size and modification time. */
static int attributes(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    WIN32_FILE_ATTRIBUTE_DATA data;
    if (!GetFileAttributesExA(path, GetFileExInfoStandard, &data))
        return fail(L, path);
    const char *mode = (data.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) ? "directory" : "file";
    ULARGE_INTEGER t;
    t.LowPart = data.ftLastWriteTime.dwLowDateTime;
    t.HighPart = data.ftLastWriteTime.dwHighDateTime;
    lua_Number modified = (lua_Number)((t.QuadPart - 116444736000000000ULL) / 10000000ULL);
    lua_Number size = (lua_Number)(((unsigned long long)data.nFileSizeHigh << 32) | data.nFileSizeLow);
    if (lua_isstring(L, 2)) {
        const char *name = lua_tostring(L, 2);
        if (strcmp(name, "mode") == 0) lua_pushstring(L, mode);
        else if (strcmp(name, "size") == 0) lua_pushnumber(L, size);
        else if (strcmp(name, "modification") == 0 || strcmp(name, "access") == 0 || strcmp(name, "change") == 0)
            lua_pushnumber(L, modified);
        else lua_pushnil(L);
        return 1;
    }
    lua_newtable(L);
    lua_pushstring(L, mode); lua_setfield(L, -2, "mode");
    lua_pushnumber(L, size); lua_setfield(L, -2, "size");
    lua_pushnumber(L, modified); lua_setfield(L, -2, "modification");
    return 1;
}

static int currentdir(lua_State *L) {
    char buf[MAX_PATH * 4];
    if (!_getcwd(buf, sizeof buf)) return fail(L, "getcwd");
    lua_pushstring(L, buf);
    return 1;
}

static int change_dir(lua_State *L) {
    if (_chdir(luaL_checkstring(L, 1)) != 0) return fail(L, "chdir");
    lua_pushboolean(L, 1);
    return 1;
}

static int make_dir(lua_State *L) {
    if (!CreateDirectoryA(luaL_checkstring(L, 1), NULL)) return fail(L, "mkdir");
    lua_pushboolean(L, 1);
    return 1;
}

static int remove_dir(lua_State *L) {
    if (!RemoveDirectoryA(luaL_checkstring(L, 1))) return fail(L, "rmdir");
    lua_pushboolean(L, 1);
    return 1;
}

/* lfs.dir(path): an iterator over the names, read whole up front. */
static int next_name(lua_State *L) {
    lua_Integer i = lua_tointeger(L, lua_upvalueindex(2)) + 1;
    lua_pushinteger(L, i);
    lua_replace(L, lua_upvalueindex(2));
    lua_rawgeti(L, lua_upvalueindex(1), (int)i);
    return 1;
}

static int dir(lua_State *L) {
    const char *path = luaL_checkstring(L, 1);
    lua_pushfstring(L, "%s\\*", path);
    WIN32_FIND_DATAA found;
    HANDLE h = FindFirstFileA(lua_tostring(L, -1), &found);
    lua_pop(L, 1);
    if (h == INVALID_HANDLE_VALUE) return luaL_error(L, "cannot open %s", path);
    lua_newtable(L);
    int n = 0;
    do {
        lua_pushstring(L, found.cFileName);
        lua_rawseti(L, -2, ++n);
    } while (FindNextFileA(h, &found));
    FindClose(h);
    lua_pushinteger(L, 0);
    lua_pushcclosure(L, next_name, 2);
    return 1;
}

static const luaL_Reg lfs_functions[] = {
    {"attributes", attributes}, {"symlinkattributes", attributes}, {"currentdir", currentdir},
    {"chdir", change_dir}, {"mkdir", make_dir}, {"rmdir", remove_dir}, {"dir", dir}, {NULL, NULL}};

__declspec(dllexport) int luaopen_lfs(lua_State *L) {
    new_lib(L, lfs_functions);
    return 1;
}

/* system.gettime, monotime, sleep: seconds as numbers. */
static int gettime(lua_State *L) {
    FILETIME ft;
    GetSystemTimeAsFileTime(&ft);
    ULARGE_INTEGER t;
    t.LowPart = ft.dwLowDateTime;
    t.HighPart = ft.dwHighDateTime;
    lua_pushnumber(L, (lua_Number)(t.QuadPart - 116444736000000000ULL) / 1e7);
    return 1;
}

static int monotime(lua_State *L) {
    LARGE_INTEGER count, frequency;
    QueryPerformanceCounter(&count);
    QueryPerformanceFrequency(&frequency);
    lua_pushnumber(L, (lua_Number)count.QuadPart / (lua_Number)frequency.QuadPart);
    return 1;
}

static int sleep_for(lua_State *L) {
    lua_Number seconds = luaL_checknumber(L, 1);
    Sleep(seconds > 0 ? (DWORD)(seconds * 1000) : 0);
    return 0;
}

static const luaL_Reg system_functions[] = {
    {"gettime", gettime}, {"monotime", monotime}, {"sleep", sleep_for}, {NULL, NULL}};

__declspec(dllexport) int luaopen_system_core(lua_State *L) {
    new_lib(L, system_functions);
    return 1;
}

/* term.isatty(file): busted colours only a console. */
static int isatty_of(lua_State *L) {
    FILE **f = (FILE **)luaL_checkudata(L, 1, LUA_FILEHANDLE);
    lua_pushboolean(L, f && *f && _isatty(_fileno(*f)));
    return 1;
}

static const luaL_Reg term_functions[] = {{"isatty", isatty_of}, {NULL, NULL}};

__declspec(dllexport) int luaopen_term_core(lua_State *L) {
    new_lib(L, term_functions);
    return 1;
}
